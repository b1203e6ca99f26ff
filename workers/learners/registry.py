"""Learner families by name, and seeding of any scikit-learn classifier.

A *learner* is what a caller configures for teachers, students or the final model:

- a family name from :data:`LEARNER_FAMILIES` (``"decision_tree"``, ``"random_forest"``, ``"xgboost"``,
  ``"logistic_regression"``, ``"mlp"``, ``"cnn"``: the vocabulary of :mod:`workers.modelio.families`) with
  keyword hyperparameters;
- a mapping ``{"family": name, **hyperparameters}`` (JSON-friendly, as a job's parameters hold it);
- any unfitted scikit-learn classifier, which is cloned (and its hyperparameters updated).

Models are single-threaded by default (``n_jobs=1``): FedKT parallelises across parties.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from workers.modelio.families import ModelFamily

Learner: TypeAlias = str | Mapping | BaseEstimator


def _decision_tree(**params) -> BaseEstimator:
    # depth 6: the FedKT reference code's teacher; an unlimited tree on a teacher's slice overfits
    return DecisionTreeClassifier(**{"max_depth": 6, **params})


def _random_forest(**params) -> BaseEstimator:
    return RandomForestClassifier(**{"n_estimators": 100, "n_jobs": 1, **params})


def _xgboost(**params) -> BaseEstimator:
    from xgboost import XGBClassifier  # imported here: xgboost's import costs ~1 s

    return XGBClassifier(
        **{"n_estimators": 100, "max_depth": 6, "n_jobs": 1, "tree_method": "hist", **params}
    )


def _logistic_regression(**params) -> BaseEstimator:
    return LogisticRegression(**{"max_iter": 1000, **params})


def _torch_classifier():
    """The zoo networks' estimator, imported when a network is asked for: torch is the toolkit's [neural] extra."""
    from workers.learners.torch_classifier import TorchClassifier

    return TorchClassifier


def _mlp(**params) -> BaseEstimator:
    return _torch_classifier()(**{"architecture": "mlp", **params})


def _cnn(**params) -> BaseEstimator:
    defaults = {
        "architecture": "cnn",
        "image_shape": [1, 28, 28],
        "conv_channels": [6, 16],
        "kernel_size": 5,
        "hidden_sizes": [120, 84],
    }
    return _torch_classifier()(**{**defaults, **params})


LEARNER_FAMILIES: dict[str, Callable[..., BaseEstimator]] = {
    ModelFamily.DECISION_TREE: _decision_tree,
    ModelFamily.RANDOM_FOREST: _random_forest,
    ModelFamily.XGBOOST: _xgboost,
    ModelFamily.LOGISTIC_REGRESSION: _logistic_regression,
    ModelFamily.MLP: _mlp,
    ModelFamily.CNN: _cnn,
}


def make_learner(learner: Learner, **params: Any) -> BaseEstimator:
    """An unfitted classifier for a family name, a ``{"family": ...}`` mapping or an estimator.

    ``params`` override the configured hyperparameters. Raises ``ValueError`` for an unknown
    family or a hyperparameter the family's estimator does not take.
    """
    if isinstance(learner, BaseEstimator):
        return clone(learner).set_params(**params) if params else clone(learner)
    if isinstance(learner, Mapping):
        configured: dict[str, Any] = dict(learner)
        family = configured.pop("family", None)
        return make_learner(family, **{**configured, **params})
    if learner not in LEARNER_FAMILIES:
        raise ValueError(
            f"Unknown learner family {learner!r}; choose one of {sorted(str(family) for family in LEARNER_FAMILIES)} "
            "or pass a scikit-learn classifier."
        )
    try:
        return LEARNER_FAMILIES[learner](**params)
    except TypeError as error:  # an estimator's __init__ refuses a keyword it does not take
        raise ValueError(
            f"The {learner} learner does not take the hyperparameters {sorted(params)} ({error})."
        ) from None


def seeded_learner(learner: Learner, seed: int) -> BaseEstimator:
    """:func:`make_learner`, with ``random_state=seed`` where the estimator takes one."""
    estimator = make_learner(learner)
    if "random_state" in estimator.get_params():
        estimator.set_params(random_state=int(seed))
    return estimator
