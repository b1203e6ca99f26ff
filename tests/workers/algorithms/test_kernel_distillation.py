import numpy as np
import pytest

from workers.algorithms.kernel_distillation import KernelDistilledClassifier, rbf_block


def _known_kernel_model(seed=0, n=40, d=3, classes=3, gamma=0.5):
    rng = np.random.default_rng(seed)
    proxy = rng.normal(size=(n, d))
    alpha = rng.normal(size=(n, classes))
    return proxy, alpha, gamma


def test_rbf_block_matches_the_definition():
    a, b = np.array([[0.0, 0.0], [1.0, 2.0]]), np.array([[1.0, 0.0]])
    assert rbf_block(a, b, 0.5) == pytest.approx(np.exp(-0.5 * np.array([[1.0], [4.0]])))


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_kernel_distillation_recovers_a_known_kernel_model_on_its_own_proxy_points(solver):
    proxy, alpha, gamma = _known_kernel_model()
    teacher = rbf_block(proxy, proxy, gamma) @ alpha  # f(x'_i) = Σ_j α_j k(x'_j, x'_i)
    student = KernelDistilledClassifier(
        gamma=gamma, ridge=0.0, solver=solver, block_size=7, max_iter=5000, tol=1e-13
    ).fit(proxy, teacher)
    assert student.solver_ == solver
    assert student.dual_coef_ == pytest.approx(alpha, abs=1e-5)
    assert student.decision_function(proxy) == pytest.approx(teacher, abs=1e-8)
    elsewhere = np.random.default_rng(1).normal(size=(5, 3))
    assert student.decision_function(elsewhere) == pytest.approx(
        rbf_block(elsewhere, proxy, gamma) @ alpha, abs=1e-5
    )


def test_auto_solver_switches_to_conjugate_gradient_past_the_dense_limit():
    proxy, alpha, gamma = _known_kernel_model(n=30)
    teacher = rbf_block(proxy, proxy, gamma) @ alpha
    assert KernelDistilledClassifier(gamma=gamma).fit(proxy, teacher).solver_ == "cholesky"
    assert (
        KernelDistilledClassifier(gamma=gamma, dense_limit_bytes=8 * 29 * 29)
        .fit(proxy, teacher)
        .solver_
        == "cg"
    )


def test_probabilities_are_a_softmax_of_the_outputs_at_the_fitted_temperature():
    proxy = np.array([[0.0], [10.0], [20.0]])
    teacher = np.array([[0.2, 0.1, 0.7], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    student = KernelDistilledClassifier(gamma=1.0, ridge=0.0).fit(proxy, teacher)
    outputs = student.decision_function(proxy)
    assert outputs == pytest.approx(teacher)
    expected = np.exp(outputs / student.temperature_)
    assert student.predict_proba(proxy) == pytest.approx(
        expected / expected.sum(axis=1, keepdims=True)
    )
    assert 0 < student.temperature_ < 1  # sharper than softmax(outputs): the teacher has zeros
    assert student.predict(proxy).tolist() == [2, 1, 0]
    assert student.classes_.tolist() == [0, 1, 2]


def test_duplicate_proxy_points_without_ridge_are_refused_with_advice():
    with pytest.raises(ValueError, match="ridge > 0"):
        KernelDistilledClassifier(gamma=1.0, ridge=0.0, solver="cholesky").fit(
            np.zeros((3, 2)), np.eye(3)
        )


def test_the_onnx_export_passes_validation_and_predicts_the_same_probabilities():
    from workers.modelio.base import ModelFormat, ModelLimits
    from workers.modelio.kernel_student import kernel_student_onnx
    from workers.modelio.native import predict_probabilities
    from workers.modelio.onnx_checks import inspect_onnx

    rng = np.random.default_rng(0)
    proxy = rng.normal(size=(60, 4))
    teacher = np.random.default_rng(1).dirichlet(np.ones(3), size=60)
    student = KernelDistilledClassifier(gamma=0.3, ridge=1e-3).fit(proxy, teacher)
    data = kernel_student_onnx(student)
    info = inspect_onnx(data, n_features=4, n_classes=3, limits=ModelLimits())
    assert info.family == "neural-network" and info.classes == (0, 1, 2)
    rows = rng.normal(size=(25, 4)).astype(np.float32)
    onnx_probabilities = predict_probabilities(data, ModelFormat.ONNX, rows, n_classes=3)
    assert onnx_probabilities == pytest.approx(student.predict_proba(rows), abs=1e-4)
