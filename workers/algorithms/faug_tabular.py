"""FAug's conditional tabular generator: a CTGAN (Xu et al. 2019, the ``ctgan`` package) trained on the pooled
seeds, the label a discrete conditioning column, and sampled conditionally on each label.

The market publishes the rows it generates, never the model: a CTGAN cannot be serialised without pickle (its
data transformer holds rdt and scikit-learn objects), so :func:`tabular_samples` returns ``rows_per_label`` rows of
every label, written by :func:`workers.algorithms.faug_samples.samples_save`.

Which columns are discrete: CTGAN models a discrete column as categories (one-hot, conditional vector) and a
continuous one by a mode-specific normalisation (a Gaussian mixture per column). Seeds arrive as numbers only, so
a feature column is treated as discrete when its seed values are all integers and take at most
:data:`DISCRETE_MAX_VALUES` distinct values (a label-encoded category, a flag, a small count), and continuous
otherwise. The label is always discrete. Generated continuous values are clipped to the seeds' range per column.

No DP: CTGAN's discriminator is trained with a WGAN gradient penalty (a gradient of the discriminator with respect to
interpolated rows, mixed across a "pac" of rows), which per-example DP-SGD (Opacus) cannot clip per seed; a private
generator is the MLP GAN of :mod:`workers.algorithms.faug`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ctgan import CTGAN
from torch.optim.optimizer import register_optimizer_step_post_hook

from workers.algorithms.faug import TrainingCancelled

DISCRETE_MAX_VALUES = 10
LABEL_COLUMN = "label"
MAX_PAC = 10
MAX_SAMPLING_ROUNDS = 20


@dataclass(frozen=True)
class TabularSetting:
    """CTGAN's training: ``epochs`` passes over the seeds in batches of ``batch_size`` (made even and a multiple of
    the "pac", the rows the discriminator reads together), small networks for a few hundred seeds."""

    epochs: int = 300
    batch_size: int = 50
    embedding_dim: int = 64
    hidden_sizes: tuple[int, ...] = (128, 128)


def discrete_columns(features: np.ndarray) -> list[int]:
    """Indices of the feature columns CTGAN treats as discrete: all seed values integers, at most
    :data:`DISCRETE_MAX_VALUES` distinct ones."""
    return [
        column
        for column in range(features.shape[1])
        if np.array_equal(features[:, column], np.round(features[:, column]))
        and len(np.unique(features[:, column])) <= DISCRETE_MAX_VALUES
    ]


def tabular_samples(
    features,
    labels,
    *,
    n_classes: int,
    rows_per_label: int,
    setting: TabularSetting = TabularSetting(),
    seed: int,
    stop_requested: Callable[[], bool] = lambda: False,
) -> tuple[np.ndarray, np.ndarray]:
    """Train a CTGAN on the pooled seeds and generate ``rows_per_label`` rows of every label it saw.

    Parameters
    ----------
    features : array of shape (n, n_features)
        Seed samples, finite numbers.
    labels : array of shape (n,)
        Their labels in ``0 .. n_classes - 1``.
    n_classes : int
    rows_per_label : int
        Rows generated for each label among the seeds (labels no silo seeded get none).
    setting : TabularSetting
    seed : int
        ctgan's random state (numpy and torch draws of training and sampling); runs on the CPU.
    stop_requested : callable returning bool
        Asked after every optimiser step of the fit; when it returns True the fit stops with
        :class:`workers.algorithms.faug.TrainingCancelled`.

    Returns
    -------
    (numpy.ndarray of float32, numpy.ndarray of int64)
        Generated features (seeded labels × rows_per_label, n_features) and their labels, each label's rows
        together in increasing label order. Sampling is conditioned on the label and rows whose generated
        label differs are dropped, at most :data:`MAX_SAMPLING_ROUNDS` rounds; a label may get fewer rows.
    """
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if features.ndim != 2 or len(features) != len(labels) or len(labels) < 2:
        raise ValueError(
            "Seeds must be an (n, n_features) matrix of at least 2 rows, one label each."
        )
    if not np.isfinite(features).all():
        raise ValueError("Seed features must be finite numbers.")
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"Seed labels must lie in 0 .. {n_classes - 1}.")
    if rows_per_label < 1:
        raise ValueError(f"Generate at least one row per label, not {rows_per_label}.")
    names = [f"feature_{column}" for column in range(features.shape[1])]
    table = pd.DataFrame(features, columns=names)
    table[LABEL_COLUMN] = labels
    batch_size = max(2, setting.batch_size - setting.batch_size % 2)
    pac = max(p for p in range(1, MAX_PAC + 1) if batch_size % p == 0)
    model = CTGAN(
        embedding_dim=setting.embedding_dim,
        generator_dim=setting.hidden_sizes,
        discriminator_dim=setting.hidden_sizes,
        batch_size=batch_size,
        epochs=setting.epochs,
        pac=pac,
        enable_gpu=False,
    )
    model.set_random_state(seed)
    with warnings.catch_warnings(), _stopped_between_steps(stop_requested):
        warnings.simplefilter(
            "ignore"
        )  # rdt's and scikit-learn's convergence chatter on a few hundred rows
        model.fit(
            table, discrete_columns=[names[i] for i in discrete_columns(features)] + [LABEL_COLUMN]
        )
        generated = [
            _rows_of(model, label, rows_per_label) for label in sorted(set(labels.tolist()))
        ]
    rows = pd.concat(generated, ignore_index=True)
    low, high = features.min(axis=0), features.max(axis=0)
    return (
        np.clip(rows[names].to_numpy(dtype=np.float64), low, high).astype(np.float32),
        rows[LABEL_COLUMN].to_numpy(dtype=np.int64),
    )


@contextmanager
def _stopped_between_steps(stop_requested: Callable[[], bool]) -> Iterator[None]:
    """Ask ``stop_requested`` after every optimiser step while the block runs: ``CTGAN.fit`` is one loop with no
    callback, so the check hooks torch's optimisers (every optimiser of this process, for the block only; a worker
    process runs one training at a time)."""

    def check(optimizer, args, kwargs) -> None:
        if stop_requested():
            raise TrainingCancelled("The training was cancelled.")

    handle = register_optimizer_step_post_hook(check)
    try:
        yield
    finally:
        handle.remove()


def _rows_of(model: CTGAN, label: int, count: int) -> pd.DataFrame:
    """Up to ``count`` generated rows whose label is ``label`` (conditional sampling, mismatches dropped)."""
    kept: list[pd.DataFrame] = []
    found = 0
    for _ in range(MAX_SAMPLING_ROUNDS):
        drawn = model.sample(count, condition_column=LABEL_COLUMN, condition_value=label)
        matching = drawn[drawn[LABEL_COLUMN].astype(np.int64) == label]
        kept.append(matching)
        found += len(matching)
        if found >= count:
            break
    return pd.concat(kept, ignore_index=True).head(count)


__all__ = ["DISCRETE_MAX_VALUES", "TabularSetting", "discrete_columns", "tabular_samples"]
