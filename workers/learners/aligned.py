"""Classifiers whose probability columns always cover the full class list ``0 .. n_classes-1``.

A FedKT teacher sees one of ``t`` disjoint slices of a party's data, and under a Dirichlet label
partition that slice often lacks classes (or holds one class only). scikit-learn's
``predict_proba`` then has fewer columns, XGBoost refuses labels that are not ``0 .. k-1`` and
logistic regression refuses a single class. :class:`AlignedClassifier` hides all three: it
re-encodes the labels present to ``0 .. k-1``, fits the wrapped learner (or remembers the one
class), and maps the probability columns back onto ``0 .. n_classes-1``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from workers.learners.forest import fit_estimator, predict_probabilities

PREDICT_BATCH_SIZE = 65_536


class AlignedClassifier(ClassifierMixin, BaseEstimator):
    """Wrap ``estimator`` so that ``classes_`` is ``arange(n_classes)`` whatever the fit data holds.

    Parameters
    ----------
    estimator : unfitted scikit-learn classifier
        Cloned at fit; the fitted clone is ``estimator_`` (``None`` when the fit data had a
        single class; every prediction is then that class). When every class is present the
        labels the clone saw are the engine's own ``0 .. n_classes-1``, so ``estimator_`` can
        be exported on its own.
    n_classes : int
        Size of the engine's class list; labels must be integers in ``0 .. n_classes-1``.
    """

    def __init__(self, estimator, n_classes: int):
        self.estimator = estimator
        self.n_classes = n_classes

    def fit(self, X, y):
        labels = np.asarray(y).astype(np.int64)
        if labels.size == 0:
            raise ValueError("A classifier cannot be fitted on zero examples.")
        if labels.min() < 0 or labels.max() >= self.n_classes:
            raise ValueError(
                f"Labels must be integers in 0..{self.n_classes - 1}; got {labels.min()}..{labels.max()}."
            )
        self.classes_ = np.arange(self.n_classes)
        self.present_classes_, encoded = np.unique(labels, return_inverse=True)
        self.n_features_in_ = np.asarray(X).shape[1]
        if len(self.present_classes_) == 1:
            self.estimator_ = None
        else:
            self.estimator_ = fit_estimator(clone(self.estimator), X, encoded)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities of shape ``(n_examples, n_classes)``; classes unseen at fit get 0."""
        check_is_fitted(self, "classes_")
        n_examples = np.asarray(X).shape[0]
        probabilities = np.zeros((n_examples, self.n_classes))
        if self.estimator_ is None:
            probabilities[:, self.present_classes_[0]] = 1.0
            return probabilities
        for start in range(0, n_examples, PREDICT_BATCH_SIZE):
            batch = X[start : start + PREDICT_BATCH_SIZE]
            inner = predict_probabilities(self.estimator_, batch)
            # the clone saw labels 0..k-1 (k = present classes), in that order
            columns = self.present_classes_[np.asarray(self.estimator_.classes_, dtype=np.int64)]
            probabilities[start : start + len(inner), columns] = inner
        return probabilities

    def predict(self, X) -> np.ndarray:
        """Class indices in ``0 .. n_classes-1``; ties go to the lowest class index."""
        return np.argmax(self.predict_proba(X), axis=1)


def estimator_on_every_class(model, *, n_classes: int, refusal: str):
    """The fitted estimator to export for ``model``: an :class:`AlignedClassifier`'s ``estimator_`` (which reads
    the federation's classes ``0 .. n_classes-1`` directly only when it saw every one), else ``model`` itself.

    Raises ``ValueError`` with ``refusal`` (a format string with ``{trained_on}``, the classes it saw as plain
    numbers, and ``{n_classes}``) when it did not see every class.
    """
    inner = getattr(model, "estimator_", model)
    present = getattr(model, "present_classes_", None)
    trained_on = [] if present is None else [int(label) for label in present]  # no numpy reprs
    if inner is None or (present is not None and trained_on != list(range(n_classes))):
        raise ValueError(refusal.format(trained_on=trained_on, n_classes=n_classes))
    return inner
