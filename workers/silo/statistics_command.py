"""``onefold statistics``: a silo's sufficient statistics of its encoded rows, for the statistics kind (issue 40).

Offline, like ``train``: reads the silo's table and the pulled federation folder, encodes the rows with the
federation's specification (one-hot view), clips each row to the clip norm (the federation's
``statistics_clip_norm`` where its pull states one, else ``--clip-norm``, default
:data:`DEFAULT_CLIP_NORM`) and writes one JSON document (:mod:`workers.algorithms.sufficient_statistics`). At L2 the
silo adds its own example-level Gaussian noise, calibrated to ``--epsilon`` at ``--delta``
(:mod:`workers.privacy.statistics_noise`); the document declares it, and that ε is what the upload would charge.
"""

from __future__ import annotations

import json

import numpy as np

from workers.algorithms.statistics_heads import StatisticsHead
from workers.algorithms.sufficient_statistics import (
    class_statistics,
    statistics_document,
    statistics_noised,
)
from workers.features import ONE_HOT_VIEW
from workers.numbers import epsilon_text, percent_text
from workers.privacy.statistics_noise import (
    DEFAULT_SHARES,
    SHARES_WITH_SQUARES,
    statistics_noise_calibrated,
)
from workers.silo.errors import DataError
from workers.silo.folders import pulled_folder
from workers.silo.table import encode_silo_table, load_table, validation_split
from workers.silo.training_command import read_pulled

#: The clip norm where the federation's pull states none: Adult's one-hot rows have norms 2.9–3.3 at the median
#: (docs/results/statistics.md), so most rows are scaled onto the unit sphere and few lose more than a third.
DEFAULT_CLIP_NORM = 2.0
STATISTICS_FILE = "statistics.json"


def statistics(args):
    """Compute, noise at L2, and write the silo's statistics; the JSON result and the summary text."""
    federation, spec, _public_features = read_pulled(pulled_folder(args), args.federation)
    level = args.privacy_level or federation.get("default_privacy_level", "L0")
    if level not in ("L0", "L2"):
        raise DataError(
            f"Statistics are uploaded at L0 or L2 (the silo adds the noise), not {level}."
        )
    if level not in federation["allowed_privacy_levels"]:
        raise DataError(
            f"'{args.federation}' allows privacy levels {', '.join(federation['allowed_privacy_levels'])}, "
            f"not {level}."
        )
    if (level == "L2") != (args.epsilon is not None):
        raise DataError(
            "At L2 give the ε your noise may cost (--epsilon, e.g. 1); at L0 the statistics carry no noise, "
            "so give no --epsilon."
        )
    federation_clip_norm = federation.get("statistics_clip_norm")
    if federation_clip_norm and args.clip_norm and args.clip_norm != federation_clip_norm:
        raise DataError(
            f"'{args.federation}' clips rows to norm {federation_clip_norm:g}; its statistics jobs add only "
            f"statistics of that norm, so drop --clip-norm {args.clip_norm:g}."
        )
    clip_norm = federation_clip_norm or args.clip_norm or DEFAULT_CLIP_NORM
    if not clip_norm > 0:
        raise DataError(f"--clip-norm must be positive, not {clip_norm}.")
    data = encode_silo_table(
        load_table(args.data),
        spec,
        label_column=args.label_column or federation["label_column"],
        class_labels=federation["class_labels"],
        view=ONE_HOT_VIEW,
    )
    if not len(data.labels):
        raise DataError(f"{args.data} holds no labelled row.")
    exact = class_statistics(
        data.features,
        data.labels,
        n_classes=len(federation["class_labels"]),
        clip_norm=float(clip_norm),
        squares=args.naive_bayes,
    )
    noise = None
    if level == "L2":
        shares = SHARES_WITH_SQUARES if args.naive_bayes else DEFAULT_SHARES
        try:
            noise = statistics_noise_calibrated(
                epsilon=args.epsilon, delta=args.delta, shares=shares
            )
        except ValueError as error:
            raise DataError(str(error)) from error
    released = exact if noise is None else statistics_noised(exact, noise=noise)
    document = statistics_document(released, noise=noise)
    output = args.output or pulled_folder(args) / STATISTICS_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document))
    clipped = int(np.count_nonzero(np.linalg.norm(data.features, axis=1) > clip_norm))
    local = local_score(
        data.features, data.labels, n_classes=exact.n_classes, clip_norm=float(clip_norm)
    )
    result = {
        "federation": args.federation,
        "privacy_level": level,
        "rows": int(len(data.labels)),
        "class_counts": exact.counts.astype(int).tolist(),
        "features": exact.n_features,
        "clip_norm": float(clip_norm),
        "clipped_rows": clipped,
        "privacy": document["privacy"],
        "local_lda": local,
        "output": str(output),
    }
    return result, statistics_summary(result, federation["class_labels"])


def statistics_summary(result: dict, class_labels: list[str]) -> str:
    counts = ", ".join(
        f"{label} {count}" for label, count in zip(class_labels, result["class_counts"])
    )
    lines = [
        f"Statistics of {result['rows']} rows ({counts}) over {result['features']} encoded features, "
        f"{result['clipped_rows']} row(s) clipped to norm {result['clip_norm']:g}: written to {result['output']}."
    ]
    if result["local_lda"] is not None:
        local = result["local_lda"]
        lines.append(
            f"Your rows alone: LDA from the statistics of {local['fitted_rows']} of them scores "
            f"{percent_text(local['accuracy'])} on the other {local['held_out_rows']} (always the majority class: "
            f"{percent_text(local['majority_accuracy'])}); the federation's sum is what a job fits."
        )
    privacy = result["privacy"]
    if privacy is None:
        lines.append("L0: no noise; the market sees your exact counts, sums and second moment.")
    else:
        lines.append(
            f"L2: your Gaussian noise costs ε = {epsilon_text(privacy['epsilon'])} (example-level, data-independent, "
            f"δ = {privacy['delta']:g}, one release)."
        )
    return "\n".join(lines)


def local_score(features, labels, *, n_classes: int, clip_norm: float) -> dict | None:
    """How an exact LDA head from 80 % of the silo's rows scores on the other 20 % (None with under 10 rows): what
    its statistics alone are worth, against always answering their majority class. Local, so no noise."""
    if len(labels) < 10:
        return None
    fitted, held_out = validation_split(labels, 0.2, 0)
    head = StatisticsHead("lda", regularization=1.0).fit_statistics(
        class_statistics(
            features[fitted],
            labels[fitted],
            n_classes=n_classes,
            clip_norm=clip_norm,
            squares=False,
        )
    )
    majority = np.bincount(labels[fitted], minlength=n_classes).argmax()
    return {
        "fitted_rows": int(len(fitted)),
        "held_out_rows": int(len(held_out)),
        "accuracy": float(np.mean(head.predict(features[held_out]) == labels[held_out])),
        "majority_accuracy": float(np.mean(labels[held_out] == majority)),
    }
