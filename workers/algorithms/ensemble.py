"""Ensembles of local models: Guha, Talwalkar, Smith, *One-Shot Federated Learning* (2019),
section 3 "Ensembling": the global model averages the selected local models' predictions.

- :func:`member_probabilities` — one model's probabilities over the full class list: columns of
  classes the model never saw are 0, and a model with no ``predict_proba`` casts a hard vote
  (probability 1 on its predicted class).
- :func:`stacked_probabilities` — every member on the same rows, computed once in row batches,
  so strategies and top-``k`` cuts reuse them (:func:`average_probabilities` of any subset).
- :func:`average_probabilities` — the one weighted average of members' probabilities, used by the
  ensembles in memory, the stored ones (:mod:`workers.algorithms.bundle`, which the market predicts
  with) and the research runs alike.
- :class:`EnsembleClassifier` — the ensemble of fitted models as a scikit-learn classifier;
  :meth:`EnsembleClassifier.to_bundle` saves it as a bundle (:mod:`workers.modelio.bundle`) of
  member files in upload formats (:func:`safe_member_file`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from workers.learners.aligned import estimator_on_every_class
from workers.modelio.artifact import export_formats, exported_file
from workers.modelio.bundle import BundleMember, bundle_write

BATCH_ROWS = 8192
MEMBER_REFUSAL = (
    "A member trained on classes {trained_on} of {n_classes} cannot be saved on its own; save the ensemble "
    "without it or retrain it on every class."
)


def member_probabilities(model, features, n_classes: int) -> np.ndarray:
    """``(n, n_classes)`` probabilities of one fitted model, aligned by its ``classes_``."""
    features = np.asarray(features)
    probabilities = np.zeros((len(features), n_classes))
    if not hasattr(model, "predict_proba"):
        probabilities[
            np.arange(len(features)), np.asarray(model.predict(features), dtype=np.int64)
        ] = 1.0
        return probabilities
    own = np.asarray(model.predict_proba(features), dtype=np.float64)
    classes = np.asarray(getattr(model, "classes_", np.arange(own.shape[1])), dtype=np.int64)
    if classes.min(initial=0) < 0 or classes.max(initial=0) >= n_classes:
        raise ValueError(
            f"A member predicts classes {classes.tolist()} outside 0..{n_classes - 1}."
        )
    probabilities[:, classes] = own
    return probabilities


def stacked_probabilities(
    models: Sequence, features, n_classes: int, *, batch_rows: int = BATCH_ROWS
) -> np.ndarray:
    """``(n_models, n, n_classes)``: every model's probabilities, predicted in row batches."""
    features = np.asarray(features)
    stacked = np.empty((len(models), len(features), n_classes))
    for start in range(0, len(features), batch_rows):
        batch = features[start : start + batch_rows]
        for index, model in enumerate(models):
            stacked[index, start : start + len(batch)] = member_probabilities(
                model, batch, n_classes
            )
    return stacked


def average_probabilities(
    stacked, members: Sequence[int] | None = None, weights=None
) -> np.ndarray:
    """The (weighted) mean over ``members`` (all by default) of ``stacked`` ``(m, n, C)`` → ``(n, C)``."""
    stacked = np.asarray(stacked, dtype=np.float64)
    chosen = stacked if members is None else stacked[np.asarray(members, dtype=np.int64)]
    if len(chosen) == 0:
        raise ValueError("An ensemble needs at least one member.")
    if weights is None:
        return chosen.mean(axis=0)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(chosen),) or np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError(
            "Ensemble weights must be one non-negative number per member, not all zero."
        )
    return np.tensordot(weights / weights.sum(), chosen, axes=1)


class EnsembleClassifier(ClassifierMixin, BaseEstimator):
    """The average of fitted member classifiers (Guha section 3), on the class list ``0..n_classes-1``.

    Parameters
    ----------
    estimators : sequence of fitted classifiers
        Members already trained by their silos; ``fit`` does not refit them (its ``X`` and ``y``
        are only checked for shape). Members may know a subset of the classes.
    n_classes : int
    weights : sequence of float or None
        Non-negative weight per member; ``None`` is the plain average.
    """

    def __init__(self, estimators=(), n_classes=2, weights=None):
        self.estimators = estimators
        self.n_classes = n_classes
        self.weights = weights

    def fit(self, X=None, y=None):
        if len(self.estimators) == 0:
            raise ValueError("An ensemble needs at least one member.")
        self.estimators_ = list(self.estimators)
        self.classes_ = np.arange(self.n_classes)
        self.n_features_in_ = (
            np.asarray(X).shape[1]
            if X is not None
            else getattr(self.estimators_[0], "n_features_in_", None)
        )
        average_probabilities(
            np.zeros((len(self.estimators_), 0, self.n_classes)), weights=self.weights
        )
        return self

    def predict_proba(self, X) -> np.ndarray:
        return average_probabilities(
            stacked_probabilities(self.estimators_, X, self.n_classes), weights=self.weights
        )

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.predict_proba(X), axis=1)

    def to_bundle(self, n_features: int | None = None) -> bytes:
        """The bundle zip of the members, each exported to a safe format (:func:`safe_member_file`)."""
        n_features = n_features or self.n_features_in_
        weights = (
            [1.0] * len(self.estimators_)
            if self.weights is None
            else [float(w) for w in self.weights]
        )
        files = [
            safe_member_file(model, n_features=n_features, n_classes=self.n_classes)
            for model in self.estimators_
        ]
        members = [
            BundleMember(
                format=model_format,
                data=data,
                weight=weight,
                classes=tuple(range(self.n_classes)),  # every member saw every class
            )
            for (model_format, data), weight in zip(files, weights)
        ]
        return bundle_write(members, n_classes=self.n_classes, n_features=n_features)


def safe_member_file(model, *, n_features: int, n_classes: int) -> tuple[str, bytes]:
    """``(format, bytes)`` of one fitted member in its family's upload format
    (:attr:`workers.modelio.artifact.ExportFormats.upload`: XGBoost → xgboost-json, a zoo network →
    safetensors, a kernel student and other scikit-learn models → onnx).

    A model wrapped in :class:`~workers.learners.AlignedClassifier` is exported through its inner
    estimator, which must have seen every class (else the file could not name the classes).
    """
    inner = estimator_on_every_class(model, n_classes=n_classes, refusal=MEMBER_REFUSAL)
    exported = exported_file(inner, export_formats(inner).upload, n_features=n_features)
    return exported.format, exported.data
