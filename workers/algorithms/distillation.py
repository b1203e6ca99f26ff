"""Distil any teacher into one student on unlabelled proxy data, and measure how faithful it is.

Guha, Talwalkar, Smith, *One-Shot Federated Learning* (2019), section 3 "Distillation": the
ensemble (or any teacher: a FedKT vote labelling, cohort models) labels unlabelled proxy points
and one small model is fitted to those labels. The student is chosen by ``student``:

- ``"kernel"`` or ``{"family": "kernel", "gamma", "ridge", "solver"}``: Guha eq. 3
  (:mod:`workers.algorithms.kernel_distillation`);
- a torch family (``"mlp"``, ``"cnn"``): softened-KL distillation (Hinton et al.;
  :mod:`workers.algorithms.neural_distillation`);
- any other learner family (random forest, XGBoost, logistic regression): fitted on the
  teacher's arg-max labels (``target="argmax"``) or on its soft labels (``target="soft"``:
  every proxy point is repeated once per class the teacher gives mass to, weighted by that
  probability, which minimises the expected cross-entropy to the teacher).

Fidelity is the share of points where the student's arg-max equals the teacher's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sklearn.base import clone

from workers.algorithms.kernel_distillation import KernelDistilledClassifier
from workers.learners import AlignedClassifier, Learner, fit_aligned, seeded_learner
from workers.modelio.families import NETWORK_FAMILIES

KERNEL_OPTIONS = ("gamma", "ridge", "solver", "block_size", "dense_limit_bytes", "max_iter", "tol")


class WeightedAlignedClassifier(AlignedClassifier):
    """:class:`AlignedClassifier` whose ``fit`` passes ``sample_weight`` to the wrapped learner."""

    def fit(self, X, y, sample_weight=None):
        labels = np.asarray(y).astype(np.int64)
        self.classes_ = np.arange(self.n_classes)
        self.present_classes_, encoded = np.unique(labels, return_inverse=True)
        self.n_features_in_ = np.asarray(X).shape[1]
        self.estimator_ = (
            None
            if len(self.present_classes_) == 1
            else clone(self.estimator).fit(X, encoded, sample_weight=sample_weight)
        )
        return self


def student_family(student: Learner) -> str:
    """The family name of a student setting ("kernel", "mlp", "random_forest", ...)."""
    if isinstance(student, str):
        return student
    if isinstance(student, Mapping):
        return str(student.get("family"))
    return type(student).__name__


def distil(
    student: Learner,
    features,
    teacher_probabilities,
    *,
    seed: int,
    target: str = "soft",
    temperature: float = 2.0,
    hard_label_weight: float = 0.0,
):
    """Fit ``student`` on proxy ``features`` to the teacher's probabilities ``(n, C)``.

    Returns a fitted classifier whose ``predict_proba`` has C columns (``classes_ = arange(C)``).
    ``target`` ("soft" or "argmax") applies to scikit-learn students, ``temperature`` and
    ``hard_label_weight`` to torch students; the kernel student always fits the soft predictions.
    """
    teacher_probabilities = np.asarray(teacher_probabilities, dtype=np.float64)
    features = np.asarray(features)
    n_classes = teacher_probabilities.shape[1]
    family = student_family(student)
    if family == "kernel":
        options = (
            {} if isinstance(student, str) else {k: v for k, v in student.items() if k != "family"}
        )
        unknown = set(options) - set(KERNEL_OPTIONS)
        if unknown:
            raise ValueError(
                f"Unknown kernel-student settings {sorted(unknown)}; known: {list(KERNEL_OPTIONS)}."
            )
        return KernelDistilledClassifier(**options).fit(features, teacher_probabilities)
    if family in NETWORK_FAMILIES:
        from workers.algorithms.neural_distillation import distil_torch

        return distil_torch(
            student,
            features,
            teacher_probabilities,
            temperature=temperature,
            hard_label_weight=hard_label_weight,
            seed=seed,
        )
    if target == "argmax":
        return fit_aligned(
            student, features, teacher_probabilities.argmax(axis=1), n_classes=n_classes, seed=seed
        )
    if target != "soft":
        raise ValueError(f"The student's target must be 'soft' or 'argmax', not {target!r}.")
    rows, classes = np.nonzero(teacher_probabilities > 0)
    model = WeightedAlignedClassifier(seeded_learner(student, seed), n_classes)
    return model.fit(features[rows], classes, sample_weight=teacher_probabilities[rows, classes])


def fidelity(student, features, teacher_probabilities) -> float:
    """Share of ``features`` rows where the student's arg-max class equals the teacher's."""
    teacher_labels = np.asarray(teacher_probabilities).argmax(axis=1)
    return (
        float(np.mean(np.asarray(student.predict(features)) == teacher_labels))
        if len(teacher_labels)
        else 0.0
    )
