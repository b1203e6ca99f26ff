"""Knowledge-transfer steps shared by FedKT and the other algorithms: seeds, which public
examples are queried, predictions of many models, and fitting a model on (noisy) vote labels.

Which rows are queried (:data:`QUERY_SELECTIONS`): ``"random"``, a seeded uniform sample, or ``"medoids"``,
the real row nearest to each centroid of a seeded k-means of the standardised public features
(:func:`select_medoids`). Both read the public features only, never a label or a vote, so the choice costs no
privacy. A model fitted on the labelled rows may then learn from every public row (:data:`SEMI_SUPERVISED`,
:func:`fit_semi_supervised`): label spreading or self-training read only the public features and the labels
already released, so they are post-processing and cost no ε either.

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
#: How the queried public rows are chosen (module docstring); the first is the historical default.
QUERY_SELECTIONS = ("random", "medoids")
#: How the global model uses the public rows nobody labelled: not at all, label spreading over a k-nearest-
#: neighbour graph of the public features, or self-training (the first is the historical default).
SEMI_SUPERVISED = ("none", "label_spreading", "self_training")
SPREADING_NEIGHBOURS = 10
SELF_TRAINING_THRESHOLD = 0.8


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


def _standardised(features) -> np.ndarray:
    features = np.asarray(features, dtype=np.float64)
    scale = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def select_medoids(features, size: int, *, seed: int) -> np.ndarray:
    """Sorted indices of ``size`` distinct public rows that cover the public features: a k-means (k = ``size``,
    seeded) of the standardised features, then for each centroid in turn the nearest row not taken yet.

    Reads the features only (no label, no vote): choosing the queried rows this way costs no privacy.
    Deterministic for a given seed and features.
    """
    from sklearn.cluster import KMeans

    standardised = _standardised(features)
    n_public = len(standardised)
    if not 1 <= size <= n_public:
        raise ValueError(f"Cannot query {size} of {n_public} public examples.")
    if size == n_public:
        return np.arange(n_public)
    centroids = (
        KMeans(n_clusters=size, n_init=1, max_iter=100, random_state=seed % 2**32)
        .fit(standardised)
        .cluster_centers_
    )
    taken = np.zeros(n_public, dtype=bool)
    chosen = []
    for centroid in centroids:
        distances = np.square(standardised - centroid).sum(axis=1)
        distances[taken] = np.inf
        nearest = int(np.argmin(distances))
        taken[nearest] = True
        chosen.append(nearest)
    return np.sort(np.asarray(chosen, dtype=np.int64))


def choose_queries(
    public_features, query: Query, *, seed: int, selection: str = "random"
) -> np.ndarray:
    """The queried rows: :func:`select_queries` (``"random"``) or :func:`select_medoids` of as many rows
    (``"medoids"``)."""
    if selection not in QUERY_SELECTIONS:
        raise ValueError(
            f"The query selection must be one of {QUERY_SELECTIONS}, not {selection!r}."
        )
    n_public = len(public_features)
    drawn = select_queries(n_public, query, seed=seed)
    if selection == "random" or len(drawn) == n_public:
        return drawn
    return select_medoids(public_features, len(drawn), seed=seed)


def queried_rows(n_public: int, setting: Mapping, *, seed: int, public_features=None) -> np.ndarray:
    """The rows a job's validated query setting (``query_fraction`` or ``query_count``, and ``query_selection``)
    queries; ``public_features`` is needed for ``"medoids"``."""
    selection = setting.get("query_selection", "random")
    if selection == "random":
        return select_queries(n_public, query_argument(setting), seed=seed)
    if public_features is None:
        raise ValueError("Medoid selection needs the public features.")
    return choose_queries(public_features, query_argument(setting), seed=seed, selection=selection)


def predict_classes(models: Sequence[Any], features) -> np.ndarray:
    """Class indices predicted by each model: int64 array (n_models, n_examples)."""
    return (
        np.stack([np.asarray(model.predict(features), dtype=np.int64) for model in models])
        if len(models)
        else np.empty((0, len(features)), dtype=np.int64)
    )


def with_every_class(features, labels, *, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``features`` and ``labels`` with one anchoring row for each class no label names: a copy of the first row,
    labelled with that class. A global model fitted on them has an output for every class, so it exports and
    serves (it gives such a class a small probability) instead of failing the job after its noise was drawn
    (issue 45: 10 queried rows of a 6-class federation left classes unlabelled). Post-processing of the released
    labels: no privacy cost."""
    features, labels = np.asarray(features), np.asarray(labels, dtype=np.int64)
    missing = np.setdiff1d(np.arange(n_classes), labels)
    if not len(missing) or not len(labels):
        return features, labels
    anchors = np.repeat(features[:1], len(missing), axis=0)
    return np.concatenate([features, anchors]), np.concatenate([labels, missing])


def _fit(learner, features, labels, *, n_classes, seed, n_jobs, every_class):
    if every_class:
        features, labels = with_every_class(features, labels, n_classes=n_classes)
    return fit_aligned(learner, features, labels, n_classes=n_classes, seed=seed, n_jobs=n_jobs)


def fit_on_votes(
    counts,
    features,
    *,
    learner: Learner,
    n_classes: int,
    seed: int,
    noise=None,
    n_jobs: int = 1,
    every_class: bool = False,
):
    """Label examples by (noisy) vote and fit a model on the non-abstaining ones.

    Returns ``(model, noisy_counts or None, labels, trained_mask)``; ``n_jobs``: threads of the fit
    (:func:`workers.learners.fit_aligned`); ``every_class``: a global model, anchored on every class
    (:func:`with_every_class`).
    """
    noisy = None if noise is None else np.asarray(noise.noisy_counts(counts))
    (tie_seed,) = child_seeds(seed, 1)  # the model keeps ``seed`` itself, as before ties were drawn
    labels, abstained = label_by_vote(counts if noisy is None else noisy, seed=tie_seed)
    trained = ~abstained
    if not trained.any():
        raise ValueError(
            "Every queried example abstained (no votes above zero) or was withheld by Confident-GNMax's "
            "consensus check; query more public examples, use less noise or a lower threshold."
        )
    model = _fit(
        learner,
        features[trained],
        labels[trained],
        n_classes=n_classes,
        seed=seed,
        n_jobs=n_jobs,
        every_class=every_class,
    )
    return model, noisy, labels, trained


def spread_labels(
    all_features, labelled: np.ndarray, labels: np.ndarray, *, n_classes: int
) -> np.ndarray:
    """Labels for every row of ``all_features`` by label spreading (Zhou et al. 2004) over a k-nearest-neighbour
    graph of the standardised features, from the rows ``labelled`` (indices) and their ``labels``."""
    from sklearn.semi_supervised import LabelSpreading

    targets = np.full(len(all_features), -1, dtype=np.int64)
    targets[labelled] = labels
    neighbours = min(SPREADING_NEIGHBOURS, len(all_features) - 1)
    spreading = LabelSpreading(
        kernel="knn", n_neighbors=max(1, neighbours), alpha=0.2, max_iter=100
    )
    spreading.fit(_standardised(all_features), targets)
    spread = np.asarray(spreading.transduction_, dtype=np.int64)
    spread[labelled] = labels  # a released label is kept as it was released
    return np.clip(spread, 0, n_classes - 1)


def fit_semi_supervised(
    all_features,
    labelled: np.ndarray,
    labels: np.ndarray,
    *,
    method: str,
    learner: Learner,
    n_classes: int,
    seed: int,
    n_jobs: int = 1,
    every_class: bool = False,
):
    """A model of ``learner`` fitted on every public row from the ``labels`` of the rows ``labelled`` (indices).

    ``"label_spreading"``: labels spread over the neighbour graph (:func:`spread_labels`), then one fit on all
    rows. ``"self_training"``: a fit on the labelled rows, which labels the other rows it predicts with
    probability ≥ :data:`SELF_TRAINING_THRESHOLD`, then one fit on the labelled and those rows. Both read the
    public features and released labels only (post-processing, no privacy cost). ``every_class``: as for
    :func:`fit_on_votes`.
    """
    all_features = np.asarray(all_features)
    labelled = np.asarray(labelled, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    if method == "label_spreading":
        targets, rows = spread_labels(all_features, labelled, labels, n_classes=n_classes), None
    elif method == "self_training":
        first = _fit(
            learner,
            all_features[labelled],
            labels,
            n_classes=n_classes,
            seed=seed,
            n_jobs=n_jobs,
            every_class=every_class,
        )
        probabilities = np.asarray(first.predict_proba(all_features))
        targets = probabilities.argmax(axis=1).astype(np.int64)
        targets[labelled] = labels
        confident = probabilities.max(axis=1) >= SELF_TRAINING_THRESHOLD
        confident[labelled] = True
        rows = np.flatnonzero(confident)
    else:
        raise ValueError(
            f"Semi-supervised training must be one of {SEMI_SUPERVISED[1:]}, not {method!r}."
        )
    rows = np.arange(len(all_features)) if rows is None else rows
    return _fit(
        learner,
        all_features[rows],
        targets[rows],
        n_classes=n_classes,
        seed=seed,
        n_jobs=n_jobs,
        every_class=every_class,
    )
