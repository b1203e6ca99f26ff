"""Knowledge-transfer steps shared by FedKT and the other algorithms: seeds, which public
examples are queried, predictions of many models, and fitting a model on (noisy) vote labels.

FedKT (Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting*,
Algorithm 1) uses them on both tiers: teachers → student at a party, students → final model at
the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from workers.algorithms.schema import query_argument
from workers.algorithms.voting import label_by_vote
from workers.learners import Learner, fit_aligned

Query = int | float


def child_seeds(seed: int | np.random.SeedSequence, count: int) -> list[int]:
    """``count`` independent integer seeds derived from ``seed`` (stable across runs)."""
    sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [int(child.generate_state(1)[0]) for child in sequence.spawn(count)]


def select_queries(n_public: int, query: Query, *, seed: int) -> np.ndarray:
    """Sorted indices of the queried public examples: all of them for ``query=1.0``, else a
    uniform sample without replacement of ``query`` examples (int) or ``ceil(query·n_public)``
    (float fraction)."""
    if isinstance(query, bool) or not isinstance(query, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"The query must be a count or a fraction of the public data, not {query!r}."
        )
    if isinstance(query, (float, np.floating)):
        if not 0.0 < query <= 1.0:
            raise ValueError(f"A query fraction must lie in (0, 1], not {query}.")
        size = int(np.ceil(query * n_public))
    else:
        size = int(query)
    if not 1 <= size <= n_public:
        raise ValueError(f"Cannot query {size} of {n_public} public examples.")
    if size == n_public:
        return np.arange(n_public)
    return np.sort(np.random.default_rng(seed).choice(n_public, size=size, replace=False))


def queried_rows(n_public: int, setting: Mapping, *, seed: int) -> np.ndarray:
    """:func:`select_queries` for a job's validated query setting (``query_fraction`` or ``query_count``)."""
    return select_queries(n_public, query_argument(setting), seed=seed)


def predict_classes(models: Sequence[Any], features) -> np.ndarray:
    """Class indices predicted by each model: int64 array (n_models, n_examples)."""
    return (
        np.stack([np.asarray(model.predict(features), dtype=np.int64) for model in models])
        if len(models)
        else np.empty((0, len(features)), dtype=np.int64)
    )


def fit_on_votes(
    counts, features, *, learner: Learner, n_classes: int, seed: int, noise=None, n_jobs: int = 1
):
    """Label examples by (noisy) vote and fit a model on the non-abstaining ones.

    Returns ``(model, noisy_counts or None, labels, trained_mask)``; ``n_jobs``: threads of the fit
    (:func:`workers.learners.fit_aligned`).
    """
    noisy = None if noise is None else np.asarray(noise.noisy_counts(counts))
    (tie_seed,) = child_seeds(seed, 1)  # the model keeps ``seed`` itself, as before ties were drawn
    labels, abstained = label_by_vote(counts if noisy is None else noisy, seed=tie_seed)
    trained = ~abstained
    if not trained.any():
        raise ValueError(
            "Every queried example abstained (no votes above zero); query more public examples "
            "or use less noise."
        )
    model = fit_aligned(
        learner, features[trained], labels[trained], n_classes=n_classes, seed=seed, n_jobs=n_jobs
    )
    return model, noisy, labels, trained
