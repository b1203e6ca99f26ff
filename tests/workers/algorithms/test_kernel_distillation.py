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
    teacher = rbf_block(proxy, proxy, gamma) @ alpha          # f(x'_i) = Σ_j α_j k(x'_j, x'_i)
    student = KernelDistilledClassifier(gamma=gamma, ridge=0.0, solver=solver, block_size=7,
                                        max_iter=5000, tol=1e-13).fit(proxy, teacher)
    assert student.solver_ == solver
    assert student.dual_coef_ == pytest.approx(alpha, abs=1e-5)
    assert student.decision_function(proxy) == pytest.approx(teacher, abs=1e-8)
    elsewhere = np.random.default_rng(1).normal(size=(5, 3))
    assert student.decision_function(elsewhere) == pytest.approx(rbf_block(elsewhere, proxy, gamma) @ alpha,
                                                                 abs=1e-5)


def test_auto_solver_switches_to_conjugate_gradient_past_the_dense_limit():
    proxy, alpha, gamma = _known_kernel_model(n=30)
    teacher = rbf_block(proxy, proxy, gamma) @ alpha
    assert KernelDistilledClassifier(gamma=gamma).fit(proxy, teacher).solver_ == "cholesky"
    assert KernelDistilledClassifier(gamma=gamma, dense_limit_bytes=8 * 29 * 29).fit(proxy, teacher).solver_ == "cg"


def test_probabilities_are_clipped_and_normalised_rows():
    proxy = np.array([[0.0], [10.0]])
    student = KernelDistilledClassifier(gamma=1.0, ridge=0.0).fit(proxy, np.array([[0.2, -0.1, 0.6], [0.0, 0.0, 0.0]]))
    assert student.predict_proba(proxy) == pytest.approx(np.array([[0.25, 0.0, 0.75], [1 / 3, 1 / 3, 1 / 3]]))
    assert student.predict(proxy).tolist() == [2, 0]
    assert student.classes_.tolist() == [0, 1, 2]


def test_duplicate_proxy_points_without_ridge_are_refused_with_advice():
    with pytest.raises(ValueError, match="ridge > 0"):
        KernelDistilledClassifier(gamma=1.0, ridge=0.0, solver="cholesky").fit(np.zeros((3, 2)), np.eye(3))
