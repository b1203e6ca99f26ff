"""``seeds`` and ``augment``: federated augmentation on the silo's machine (FAug, :mod:`workers.algorithms.faug`).

``seeds`` picks seed samples of the silo's target labels and redundant samples of other labels from its table,
shows the device–server leakage |target| / (|target| + |redundant|) the market computes for them, and uploads
them (unless ``--dry-run``).

Generates samples of the silo's target labels (those it lacks) with a conditional generator (safetensors +
spec, validated before loading, never a pickle), fetched from the market's published augmentation
(``--augmentation``) or read from a file (``--generator``), and writes the silo's table with them
appended, ready for ``train --data``. The generator writes feature values in its seeds' scale (MNIST
pixels in [0, 1]); ``--feature-scale`` multiplies them for a table stored in another scale (255 for raw
pixels). Every column of the federation's specification must be numeric, one per generated feature.

A CTGAN augmentation (tabular) publishes generated rows instead of its generator (an .npz, read with
``allow_pickle=False``): ``augment`` appends up to ``--per-label`` of them for each target label, in the scale of
the seeds (raw numbers, no [0, 1] scaling), and ``seeds`` uploads raw values for it.

Needs the toolkit's training extras (torch, safetensors) for an MLP GAN's generator, imported only when it is
loaded; a CTGAN's rows need numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workers.algorithms.faug.samples import samples_load
from workers.silo.client import OnefoldClient
from workers.silo.errors import DataError
from workers.silo.folders import pulled_folder
from workers.silo.table import load_table
from workers.silo.training_command import read_pulled

MAX_GENERATOR_BYTES = 200_000_000


def augment(args, client: OnefoldClient | None = None):
    """``client`` fetches the generator of ``args.augmentation``; without it ``args.generator`` is read. A CTGAN
    augmentation publishes generated rows instead of a generator: the rows of the target labels are appended."""
    federation, spec, _ = read_pulled(pulled_folder(args), args.federation)
    class_labels = [str(label) for label in federation["class_labels"]]
    label_column = args.label_column or federation["label_column"]
    data, source = _generator_bytes(args, client)
    generator = _generator_of(data, source, n_classes=len(class_labels))
    columns = [column["name"] for column in spec["columns"]]
    if any(column["type"] != "numeric" for column in spec["columns"]):
        raise DataError(
            f"'{args.federation}' has categorical columns; this generator writes numeric features only."
        )
    if generator.n_features != len(columns) or generator.n_classes != len(class_labels):
        raise DataError(
            f"The generator makes {generator.n_features} features of {generator.n_classes}"
            f" classes; '{args.federation}' has {len(columns)} features and {len(class_labels)} classes."
        )
    if not (math.isfinite(args.feature_scale) and args.feature_scale > 0):
        raise DataError(f"--feature-scale must be a positive number, not {args.feature_scale}.")
    frame = load_table(args.data)
    missing = [name for name in [*columns, label_column] if name not in frame.columns]
    if missing:
        raise DataError(
            f"{args.data} lacks the columns {', '.join(missing[:5])}"
            f"{' and more' if len(missing) > 5 else ''}."
        )
    unknown = [label for label in args.target_label if label not in class_labels]
    if unknown or not args.target_label:
        raise DataError(
            f"Target labels must be among the federation's classes {', '.join(class_labels)}"
            + (f", not {', '.join(unknown)}." if unknown else "; give at least one --target-label.")
        )
    targets = list(dict.fromkeys(args.target_label))
    held = frame[label_column].astype(str)
    counts = held[held.isin(class_labels) & ~held.isin(targets)].value_counts()
    per_label = (
        args.per_label if args.per_label is not None else int(counts.mean()) if len(counts) else 0
    )
    if not 1 <= per_label <= 100_000:
        raise DataError(
            f"Generate between 1 and 100000 samples per label (--per-label), not {per_label}."
        )
    features, labels = generator.generate(
        [class_labels.index(label) for label in targets], per_label, seed=args.seed
    )
    if generator.published_rows:
        short = sorted(set(targets) - {class_labels[label] for label in labels})
        if short:
            raise DataError(
                f"{source} holds no generated row of {', '.join(short)} (no silo seeded it)."
            )
    generated = pd.DataFrame(features.astype(np.float64) * args.feature_scale, columns=columns)
    generated[label_column] = [class_labels[label] for label in labels]
    original = frame[[*columns, label_column]].copy()
    original[label_column] = original[label_column].astype(str)
    output = args.output or Path(args.data).with_name(f"{Path(args.data).stem}-augmented.csv")
    pd.concat([original, generated], ignore_index=True).to_csv(output, index=False)
    privacy = generator.privacy_report
    origin = "rows a CTGAN generated" if generator.published_rows else "a generator"
    result = {
        "output": str(output),
        "rows": len(frame),
        "generated_rows": len(generated),
        "target_labels": targets,
        "per_label": per_label,
        "augmentation": args.augmentation if client is not None else None,
        "generator_epsilon": None if privacy is None else privacy.epsilon,
        "generator_delta": None if privacy is None else privacy.delta,
    }
    guarantee = (
        f"{origin} without a privacy guarantee"
        if privacy is None
        else f"a generator that is ({privacy.epsilon:.3g}, {privacy.delta:g})-DP w.r.t. the seeds"
    )
    return result, (
        f"Wrote {output}: your {len(frame)} rows and {len(generated)} generated rows (up to {per_label} of "
        f"each of {', '.join(targets)}) from {guarantee}. Train on it with `train --data {output}`."
    )


@dataclass(frozen=True)
class _Generator:
    """What ``augment`` generates from: the MLP GAN's generator, or the rows a CTGAN generated (``published_rows``,
    of which ``generate`` picks up to ``count`` per label at random)."""

    n_features: int
    n_classes: int
    generate: Callable[..., tuple[np.ndarray, np.ndarray]]
    privacy_report: Any = None
    published_rows: bool = False


def _generator_of(data: bytes, source: str, *, n_classes: int) -> _Generator:
    """The generator in ``data``: an .npz of generated rows (a zip: CTGAN's samples) or a safetensors generator."""
    try:
        if data[:2] == b"PK":
            features, labels = samples_load(
                data, n_classes=n_classes, max_bytes=MAX_GENERATOR_BYTES
            )
            return _Generator(
                n_features=features.shape[1],
                n_classes=n_classes,
                generate=partial(_published_rows, features, labels),
                published_rows=True,
            )
        from workers.algorithms.faug.generator import load_generator  # torch: the [train] extra

        loaded = load_generator(data, max_bytes=MAX_GENERATOR_BYTES)
    except ValueError as error:
        raise DataError(f"{source} is not a usable generator: {error}") from error
    return _Generator(
        n_features=loaded.spec["n_features"],
        n_classes=loaded.spec["n_classes"],
        generate=loaded.generate,
        privacy_report=loaded.privacy_report,
    )


def _published_rows(
    features: np.ndarray, labels: np.ndarray, wanted: list[int], count: int, *, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``count`` published rows of each wanted label, chosen at random (``seed``), each label's together."""
    rng = np.random.default_rng(seed)
    chosen = np.concatenate(
        [rng.permutation(np.flatnonzero(labels == label))[:count] for label in wanted]
    ).astype(int)
    return features[chosen], labels[chosen]


MAX_SEEDS_PER_LABEL = 100_000


def seeds(args, client: OnefoldClient):
    """Upload seeds of ``--target-label`` labels and ``--redundant`` samples of others to augmentation
    ``args.augmentation_id``; the leakage is asked of the market first and shown even on ``--dry-run``."""
    augmentation = client.augmentation(args.augmentation_id)
    folder = args.pulled or Path(f"onefold-{augmentation.federation}")
    federation, spec, _ = read_pulled(folder, augmentation.federation)
    class_labels = [str(label) for label in federation["class_labels"]]
    label_column = args.label_column or federation["label_column"]
    columns = [column["name"] for column in spec["columns"]]
    if len(columns) != augmentation.n_features:
        raise DataError(
            f"Augmentation #{augmentation.id} takes {augmentation.n_features} features per seed; "
            f"'{augmentation.federation}' has {len(columns)} columns."
        )
    targets = list(dict.fromkeys(args.target_label))
    unknown = [label for label in targets if label not in class_labels]
    if unknown or not targets:
        raise DataError(
            f"Target labels must be among the federation's classes {', '.join(class_labels)}"
            + (f", not {', '.join(unknown)}." if unknown else "; give at least one --target-label.")
        )
    for name, value in (("--per-label", args.per_label), ("--redundant", args.redundant)):
        if value is not None and not 0 <= value <= MAX_SEEDS_PER_LABEL:
            raise DataError(f"{name} must be between 0 and {MAX_SEEDS_PER_LABEL}, not {value}.")
    if not (math.isfinite(args.feature_scale) and args.feature_scale > 0):
        raise DataError(f"--feature-scale must be a positive number, not {args.feature_scale}.")
    frame = load_table(args.data)
    missing = [name for name in [*columns, label_column] if name not in frame.columns]
    if missing:
        raise DataError(f"{args.data} lacks the columns {', '.join(missing[:5])}.")
    held = frame[label_column].astype(str)
    absent = [label for label in targets if not (held == label).any()]
    if absent:
        raise DataError(
            f"{args.data} holds no row of {', '.join(absent)}; seeds are a few samples of each target label."
        )
    rng = np.random.default_rng(args.seed)
    target_rows = np.concatenate(
        [rng.permutation(np.flatnonzero(held == label))[: args.per_label] for label in targets]
    )
    others = np.flatnonzero(held.isin(class_labels) & ~held.isin(targets))
    n_redundant = len(target_rows) if args.redundant is None else args.redundant
    chosen = np.concatenate([target_rows, rng.permutation(others)[:n_redundant]]).astype(int)
    features = frame.iloc[chosen][columns].to_numpy(dtype=np.float64) / args.feature_scale
    if not np.isfinite(features).all():
        raise DataError("Seed features must be finite numbers.")
    if augmentation.generator != "ctgan" and (features.min() < 0 or features.max() > 1):
        raise DataError(
            "Seed features must lie in [0, 1]; divide raw pixels with --feature-scale 255."
        )
    target_indices = [class_labels.index(label) for label in targets]
    labels = [class_labels.index(label) for label in held.iloc[chosen]]
    leakage = client.augmentation_leakage(
        augmentation.id, target_labels=target_indices, labels=labels
    )
    result = {"augmentation": augmentation.id, **leakage, "uploaded": not args.dry_run}
    summary = (
        f"{leakage['n_target']} target and {leakage['n_redundant']} redundant seeds: the market would learn "
        f"your target labels with leakage {leakage['leakage']:.2f}"
    )
    if args.dry_run:
        return result, f"{summary}. Nothing uploaded (--dry-run)."
    uploaded = client.augmentation_seeds_upload(
        augmentation.id,
        target_labels=target_indices,
        labels=labels,
        features=features.round(6).tolist(),
    )
    result["inter_device_leakage"] = uploaded["inter_device_leakage"]
    return result, (
        f"Uploaded {summary} to augmentation #{augmentation.id}; the other members' inter-device leakage is "
        f"{uploaded['inter_device_leakage']:.2f} of the {uploaded['n_pooled']} seeds pooled so far (it falls "
        "as more silos upload)."
    )


def _generator_bytes(args, client: OnefoldClient | None) -> tuple[bytes, str]:
    """The generator's bytes and a name for it in sentences."""
    if client is None:
        try:
            return Path(args.generator).read_bytes(), str(args.generator)
        except OSError as error:
            raise DataError(f"Cannot read {args.generator}: {error.strerror}.") from error
    augmentation = client.augmentation(args.augmentation)
    if augmentation.federation != args.federation:
        raise DataError(
            f"Augmentation #{augmentation.id} belongs to '{augmentation.federation}', not '{args.federation}'."
        )
    if augmentation.status != "published":
        raise DataError(
            f"Augmentation #{augmentation.id} has no published generator yet ({augmentation.status}"
            f"{': ' + augmentation.status_reason if augmentation.status_reason else ''})."
        )
    return client.augmentation_generator(
        augmentation.id
    ), f"Augmentation #{augmentation.id}'s generator"


__all__ = ["augment", "seeds"]
