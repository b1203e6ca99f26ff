"""The operator's rows alone (issue 39): a model fitted on the federation's evaluation split, the operator's own
labelled rows, with no silo's data. It is free, so a global model worth buying beats it: the job's baseline
(:mod:`workers.algorithms.operator_baseline`) scores it, and ``vote: auto`` (:mod:`workers.algorithms.auto_fusion`)
offers it as its last candidate, ``operator_only``, fitted on the selection half and cross-fitted there exactly as
the stacked candidate is (:func:`workers.algorithms.stacking.out_of_fold`). When ``auto`` chooses it the silos
added nothing; the job says so (:data:`SILOS_ADDED_NOTHING`) and credits no silo.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from workers.algorithms.registry import Fusion
from workers.algorithms.stacking import out_of_fold
from workers.algorithms.transfer import child_seeds
from workers.learners import AlignedClassifier, Learner, fit_aligned

#: ``auto``'s candidate that uses no silo.
OPERATOR_ONLY = "operator_only"
#: What a job chosen ``operator_only`` says, in its log and on its page, instead of selling the model as federated.
SILOS_ADDED_NOTHING = (
    "The silos added nothing: a model fitted on the operator's own evaluation rows alone, with no silo's data, "
    "scored better than every federated fusion on the selection rows, so the global model is that model: it "
    "uses no silo's upload and credits no silo."
)


def silos_added_nothing(details: Mapping) -> bool:
    """Whether a fusion with these ``Fusion.details`` used no silo (``auto`` chose :data:`OPERATOR_ONLY`)."""
    return (details.get("auto") or {}).get("chosen") == OPERATOR_ONLY


def operator_only_fit(
    learner: Learner, features: np.ndarray, labels: np.ndarray, *, n_classes: int, seed: int
) -> AlignedClassifier:
    """``learner`` fitted on the operator's rows alone (``features`` ``(n_rows, n_features)`` in the learner's
    view, ``labels`` ``(n_rows,)``), seeded from ``seed`` (a job's seed may exceed what a learner's random_state
    takes, so a child seed of it); its ``predict_proba`` has ``n_classes`` columns. The one fit of an operator-only
    model: the job's baseline's (:mod:`workers.algorithms.operator_baseline`), ``auto``'s ``operator_only``
    candidate's and the benchmark suite's."""
    return fit_aligned(learner, features, labels, n_classes=n_classes, seed=child_seeds(seed, 1)[0])


def operator_only_cross_fitted(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    final_model: Mapping,
    n_classes: int,
    folds: int,
    seed: int,
) -> np.ndarray:
    """Cross-fitted probabilities ``(n_rows, K)`` of the operator's rows (``features`` ``(n_rows, n_features)`` in
    the final model's view, ``labels`` ``(n_rows,)``: ``auto``'s selection half): each of ``folds`` stratified
    folds (seeded by ``seed``, the stacked candidate's folds) is predicted by ``final_model`` fitted on the other
    folds alone, no silo's signal and no row outside these."""
    features, labels = np.asarray(features), np.asarray(labels, dtype=np.int64)

    def predict_fold(train, held_out):
        model = operator_only_fit(
            final_model, features[train], labels[train], n_classes=n_classes, seed=seed
        )
        return model.predict_proba(features[held_out])

    return out_of_fold(predict_fold, labels, n_classes=n_classes, folds=folds, seed=seed)


def operator_only_fusion(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    final_model: Mapping,
    n_public: int,
    n_classes: int,
    seed: int,
    details: dict,
) -> Fusion:
    """The chosen ``operator_only`` candidate: ``final_model`` refitted on all the operator's rows given (the
    whole selection half); it labels and trains on none of the ``n_public`` public rows (every label -1: no
    silo's vote is used). ``details``: ``auto``'s, stored under ``"auto"``."""
    model = operator_only_fit(
        final_model, features, np.asarray(labels, dtype=np.int64), n_classes=n_classes, seed=seed
    )
    return Fusion(
        model,
        np.full(n_public, -1, dtype=np.int64),
        np.zeros(n_public, dtype=bool),
        None,
        {"operator_only": {"fit_rows": int(len(labels))}, "auto": details},
    )
