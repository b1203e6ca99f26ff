"""``onefold fd EXCHANGE``: a silo's rounds of a federated distillation exchange, end to end.

Each round: train the silo's network on its own rows (with the distillation regulariser toward the last round's
global logits: :class:`workers.algorithms.fd_local.FDLocalModel`), upload its per-label mean logits, wait for the
round to close, download its global logits (the other silos' average per label) and go on. A round that missed
its quorum gives no global logits; the next round then trains without the regulariser. At the end the network is
written like ``train --local`` writes a local model, so ``upload`` submits it like any other submission.
Loaded only when ``fd`` runs (numpy, torch: the [train] extra).
"""

from __future__ import annotations

import json

import numpy as np

from workers.algorithms.fd_local import FDLocalModel, FDLocalSetting
from workers.features import ONE_HOT_VIEW, view_width
from workers.modelio.export import export_torch_safetensors
from workers.numbers import percent_text
from workers.silo.errors import DataError
from workers.silo.folders import METADATA_FILE
from workers.silo.table import encode_silo_table, load_table, validation_split
from workers.silo.training_command import read_pulled, say

ROUND_DONE = ("aggregated", "missed_quorum")


def fd(args, client):
    exchange = client.exchange(args.exchange_id)
    slug = exchange["federation"]
    folder = args.pulled or _default_pulled(slug)
    federation, spec, _ = read_pulled(folder, slug)
    if args.privacy_level != "L0" or "L0" not in federation["allowed_privacy_levels"]:
        raise DataError(
            f"A network trained through an FD exchange learnt from the other silos' noiseless logits, so it is "
            f"submitted at L0 only; '{slug}' allows {', '.join(federation['allowed_privacy_levels'])}, and "
            f"{args.privacy_level} was asked."
        )
    say(args, f"Reading {args.data}...")
    data = encode_silo_table(
        load_table(args.data),
        spec,
        label_column=args.label_column or federation["label_column"],
        class_labels=federation["class_labels"],
        view=ONE_HOT_VIEW,
    )
    train, held_out = validation_split(data.labels, args.validation_fraction, args.seed)
    n_classes = len(federation["class_labels"])
    model = FDLocalModel(
        n_features=view_width(spec, ONE_HOT_VIEW),
        n_classes=n_classes,
        seed=args.seed,
        setting=FDLocalSetting(
            hidden_sizes=tuple(args.hidden_sizes),
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            beta=args.beta,
        ),
    )
    history, global_logits, available = [], None, None
    for number in range(1, exchange["rounds"] + 1):
        step = f"Round {number} of {exchange['rounds']}"
        say(args, f"{step}: waiting for it to open...")
        client.exchange_round_wait(
            args.exchange_id,
            number,
            statuses=("open", *ROUND_DONE),
            timeout_seconds=args.wait_timeout,
        )
        say(
            args,
            f"{step}: training the network on {len(train)} rows"
            f"{' toward the last global logits' if global_logits is not None else ''}...",
        )
        model.train_round(
            data.features[train],
            data.labels[train],
            global_logits=global_logits,
            available=available,
        )
        logits, present = model.label_logits(data.features[train], data.labels[train])
        client.exchange_logits_upload(
            args.exchange_id,
            number,
            labels=np.flatnonzero(present).tolist(),
            logits=logits.tolist(),
        )
        say(args, f"{step}: logits uploaded; waiting for the round to close (its other silos)...")
        closed = client.exchange_round_wait(
            args.exchange_id, number, statuses=ROUND_DONE, timeout_seconds=args.wait_timeout
        )
        global_logits = available = None
        if closed["status"] == "aggregated":
            download = client.exchange_download(args.exchange_id, number)
            global_logits, available = (
                np.asarray(download["global_logits"]),
                np.asarray(download["available"]),
            )
        score = float(np.mean(model.predict(data.features[held_out]) == data.labels[held_out]))
        say(
            args,
            f"{step}: {closed['status'].replace('_', ' ')} ({closed['participants']} silos); local validation "
            f"score {percent_text(score)}.",
        )
        history.append(
            {
                "round": number,
                "status": closed["status"],
                "participants": closed["participants"],
                "local_validation_score": score,
            }
        )
    return _write(args, folder, model, data, train, held_out, federation, history)


def _default_pulled(slug: str):
    from pathlib import Path

    return Path(f"onefold-{slug}")


def _write(
    args, folder, model: FDLocalModel, data, train, held_out, federation: dict, history: list[dict]
):
    output = args.output or folder / "fd-model"
    output.mkdir(parents=True, exist_ok=True)
    (output / "local-model.safetensors").write_bytes(
        export_torch_safetensors(model.module, model.spec)
    )
    n_classes = len(federation["class_labels"])
    metadata = {
        "federation": federation["slug"],
        "model_family": "mlp",
        "files": ["local-model.safetensors"],
        "algorithm": "fd",
        "exchange": args.exchange_id,
        "rounds": history,
        "n_local_examples": int(len(train)),
        "n_validation_rows": int(len(held_out)),
        "local_validation_score": history[-1]["local_validation_score"] if history else 0.0,
        "label_distribution": np.bincount(data.labels[train], minlength=n_classes)
        .astype(int)
        .tolist(),
        "privacy_level": args.privacy_level,
        "privacy_parameters": {},
        "declared_epsilon": None,
        "privacy_report": None,
        "feature_view": ONE_HOT_VIEW,
        "encoding": data.report,
    }
    (output / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
    lines = [
        f"Round {item['round']}: {item['status']} ({item['participants']} silos); local validation score "
        f"{percent_text(item['local_validation_score'])}."
        for item in history
    ]
    lines.append(
        f"Wrote local-model.safetensors and {METADATA_FILE} to {output}; submit it with "
        f"`onefold upload {output}`."
    )
    return {**metadata, "output": str(output)}, "\n".join(lines)


__all__ = ["fd"]
