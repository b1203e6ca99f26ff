"""The one vocabulary of model families: the names a learner setting uses (``{"family": "random_forest", ...}``),
a silo declares at upload and a global model's card shows, which of them are trees and networks, the family of a
fitted estimator, and the view of the features (:mod:`workers.views`) each family reads. It imports no
third-party package, so the toolkit's command line can name the families without numpy or pandas.

The learners build each family (:data:`workers.learners.LEARNER_FAMILIES`), the market's choices come from
:data:`DECLARED_FAMILIES`, and the job kinds' learner settings name these families.
"""

from __future__ import annotations

from enum import StrEnum

from workers.views import ONE_HOT_VIEW, ORDINAL_VIEW


class ModelFamily(StrEnum):
    """A family of models, by its one spelling."""

    DECISION_TREE = "decision_tree"
    RANDOM_FOREST = "random_forest"
    XGBOOST = "xgboost"
    LOGISTIC_REGRESSION = "logistic_regression"
    MLP = "mlp"
    CNN = "cnn"
    KERNEL = "kernel"  # a kernel-distilled student (Guha et al., eq. 3)
    OTHER_SKLEARN = "other_sklearn"  # a silo's scikit-learn classifier of any other kind


#: Trees read the ordinal view of the features; every other family the one-hot view.
TREE_FAMILIES = frozenset(
    {ModelFamily.DECISION_TREE, ModelFamily.RANDOM_FOREST, ModelFamily.XGBOOST}
)
#: The families a learner setting may name (:data:`workers.learners.LEARNER_FAMILIES` builds each).
LEARNER_FAMILY_NAMES = tuple(
    str(family)
    for family in ModelFamily
    if family not in (ModelFamily.KERNEL, ModelFamily.OTHER_SKLEARN)
)
#: The model zoo's torch networks (:mod:`workers.zoo`), the only families DP-SGD trains.
NETWORK_FAMILIES = (ModelFamily.MLP, ModelFamily.CNN)
#: What a silo may declare its uploaded models to be, with the sentence the pages show.
DECLARED_FAMILIES = {
    ModelFamily.RANDOM_FOREST: "Random forest",
    ModelFamily.XGBOOST: "Gradient-boosted trees (XGBoost)",
    ModelFamily.LOGISTIC_REGRESSION: "Logistic regression",
    ModelFamily.MLP: "Multi-layer perceptron",
    ModelFamily.CNN: "Convolutional network",
    ModelFamily.OTHER_SKLEARN: "Other scikit-learn classifier",
}
_ESTIMATOR_FAMILIES = {
    "RandomForestClassifier": ModelFamily.RANDOM_FOREST,
    "XGBClassifier": ModelFamily.XGBOOST,
    "LogisticRegression": ModelFamily.LOGISTIC_REGRESSION,
    "KernelDistilledClassifier": ModelFamily.KERNEL,
}


def estimator_family(estimator) -> str:
    """The family of a (fitted or unfitted) estimator, by its class, a zoo network by its ``architecture``
    (``"mlp"`` or ``"cnn"``); any other classifier is ``"other_sklearn"``. A wrapper such as
    :class:`~workers.learners.AlignedClassifier` is not looked into: pass what it wraps."""
    family = _ESTIMATOR_FAMILIES.get(type(estimator).__name__)
    if family is not None:
        return str(family)
    architecture = getattr(estimator, "architecture", None)
    return architecture if architecture in NETWORK_FAMILIES else str(ModelFamily.OTHER_SKLEARN)


def feature_view_for(*families: str) -> str:
    """The view models of these families read: ordinal when every one is a tree family (a silo's
    teachers and students read the same matrix), else one-hot."""
    return (
        ORDINAL_VIEW
        if families and all(family in TREE_FAMILIES for family in families)
        else ONE_HOT_VIEW
    )
