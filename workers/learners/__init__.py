"""Learners for FedKT and the other algorithms: a registry of model families by name, torch zoo
networks behind the scikit-learn contract, and a wrapper that aligns probability columns to the
engine's full class list ``0 .. n_classes-1``."""

from workers.learners.aligned import AlignedClassifier
from workers.learners.registry import LEARNER_FAMILIES, Learner, make_learner, seeded_learner

#: Loaded on first use: torch is the toolkit's [neural] extra, and the tree families train without it.
_TORCH_NAMES = ("TorchClassifier", "best_device")

__all__ = [
    "AlignedClassifier",
    "LEARNER_FAMILIES",
    "Learner",
    "TorchClassifier",
    "best_device",
    "make_learner",
    "seeded_learner",
    "fit_aligned",
]


def __getattr__(name: str):
    if name in _TORCH_NAMES:
        from workers.learners import torch_classifier

        return getattr(torch_classifier, name)
    raise AttributeError(f"module 'workers.learners' has no attribute {name!r}")


def fit_aligned(
    learner: Learner, features, labels, *, n_classes: int, seed: int, n_jobs: int = 1
) -> AlignedClassifier:
    """Fit a seeded clone of ``learner`` whose ``predict_proba`` has ``n_classes`` columns; a family that takes
    ``n_jobs`` (forests, XGBoost) fits with that many threads, which does not change the model."""
    estimator = seeded_learner(learner, seed)
    if n_jobs != 1 and "n_jobs" in estimator.get_params():
        estimator.set_params(n_jobs=n_jobs)
    return AlignedClassifier(estimator, n_classes).fit(features, labels)
