import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from workers.algorithms.distillation import WeightedAlignedClassifier, distil, fidelity
from workers.algorithms.kernel_distillation import KernelDistilledClassifier
from workers.algorithms.neural_distillation import distil_torch, soften
from workers.learners import TorchClassifier


@pytest.fixture(scope="module")
def digits_teacher():
    features, labels = load_digits(return_X_y=True)
    features = (features / 16.0)[:600]
    teacher = np.full((600, 10), 0.02)
    teacher[np.arange(600), labels[:600]] = 0.82
    return features, teacher


def test_soften_is_a_tempered_softmax_of_log_probabilities():
    softened = soften([[0.8, 0.2]], 2.0)
    assert softened == pytest.approx(
        np.array([[np.sqrt(0.8), np.sqrt(0.2)]]) / (np.sqrt(0.8) + np.sqrt(0.2))
    )
    assert soften([[0.8, 0.2]], 1.0) == pytest.approx(np.array([[0.8, 0.2]]))


def test_torch_student_is_a_zoo_network_over_every_class(digits_teacher):
    features, teacher = digits_teacher
    student = distil_torch(
        {"family": "mlp", "hidden_sizes": [32], "epochs": 15},
        features,
        teacher,
        temperature=2.0,
        hard_label_weight=0.3,
        seed=0,
    )
    assert isinstance(student, TorchClassifier) and student.classes_.tolist() == list(range(10))
    assert student.spec_ == {
        "architecture": "mlp",
        "n_features": 64,
        "hidden_sizes": [32],
        "n_classes": 10,
    }
    assert fidelity(student, features, teacher) > 0.9


def test_torch_student_is_seeded(digits_teacher):
    features, teacher = digits_teacher
    learner = {"family": "mlp", "hidden_sizes": [16], "epochs": 2}
    first = distil_torch(learner, features, teacher, seed=4)
    again = distil_torch(learner, features, teacher, seed=4)
    assert all(
        torch.equal(a, b)
        for a, b in zip(first.module_.state_dict().values(), again.module_.state_dict().values())
    )


def test_l1_student_moves_its_logits_to_the_teachers(digits_teacher):
    from workers.algorithms.neural_distillation import logits_of

    features, teacher = digits_teacher
    logits = np.log(teacher)
    learner = {"family": "mlp", "hidden_sizes": [32], "epochs": 30, "learning_rate": 0.01}
    untrained = distil_torch({**learner, "epochs": 0}, features, logits, loss="l1", seed=0)
    student = distil_torch(learner, features, logits, loss="l1", seed=0)
    before = np.abs(logits_of(untrained, features) - logits).sum(axis=1).mean()
    after = np.abs(logits_of(student, features) - logits).sum(axis=1).mean()
    assert after < 0.3 * before
    assert fidelity(student, features, teacher) > 0.7


def test_soft_label_forest_sees_each_point_once_per_class_with_mass(digits_teacher):
    features, teacher = digits_teacher
    student = distil(
        {"family": "random_forest", "n_estimators": 10}, features[:50], teacher[:50], seed=0
    )
    assert isinstance(student, WeightedAlignedClassifier)
    assert (
        student.predict_proba(features[:5]).shape == (5, 10)
        and fidelity(student, features[:50], teacher[:50]) > 0.9
    )


def test_argmax_target_and_kernel_dispatch(digits_teacher):
    features, teacher = digits_teacher
    tree = distil("logistic_regression", features[:200], teacher[:200], seed=0, target="argmax")
    assert tree.predict(features[:200]).tolist() == tree.predict(features[:200]).tolist()
    kernel = distil({"family": "kernel", "ridge": 1e-3}, features[:200], teacher[:200], seed=0)
    assert isinstance(kernel, KernelDistilledClassifier) and kernel.ridge == 1e-3


def test_unknown_settings_are_refused(digits_teacher):
    features, teacher = digits_teacher
    with pytest.raises(ValueError, match="kernel-student settings"):
        distil({"family": "kernel", "width": 3}, features[:10], teacher[:10], seed=0)
    with pytest.raises(ValueError, match="'soft' or 'argmax'"):
        distil("random_forest", features[:10], teacher[:10], seed=0, target="probabilities")
    with pytest.raises(ValueError, match="torch student"):
        distil_torch("random_forest", features[:10], teacher[:10], seed=0)
