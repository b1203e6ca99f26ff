"""Kernel distillation: Guha, Talwalkar, Smith, *One-Shot Federated Learning* (2019), section 3
"Distillation", eq. 3.

Given unlabelled proxy points ``x'_1 .. x'_n`` and a teacher's soft predictions ``f(x'_i)`` (one
column per class), fit dual coefficients α' minimising

    Σ_i ( f(x'_i) − Σ_j α'_j k(x'_j, x'_i) )²  (+ ridge · α'ᵀ K α', for numerical stability)

with the RBF kernel ``k(a, b) = exp(−γ ‖a − b‖²)``. Its minimiser solves ``(K + ridge·I) α' = F``
(``K`` the n × n kernel matrix of the proxy points, ``F`` the n × C teacher predictions), one
right-hand side per class. The student ``x ↦ Σ_j α'_j k(x'_j, x)`` is a kernel model over the
proxy points only: no silo's support vectors or data are in it.

The student's probabilities are ``softmax(outputs / τ)`` with one temperature ``τ`` fitted on the
proxy points (minimum cross-entropy to the teacher): the arg-max is eq. 3's, and the read-out is a
plain softmax of "logits" ``outputs / τ``, which ONNX can express with the operators the market
allows (:mod:`workers.modelio.kernel_student`).

Memory: the Cholesky solver needs exactly one n × n float64 matrix (8·n² bytes: 800 MB at
n = 10,000), filled in row blocks and factorised in place; no distance matrix, no copy. The
conjugate-gradient solver never holds more than a ``block_size`` × n block of the kernel (it
recomputes the blocks at every iteration: less memory, more time). ``solver="auto"`` takes
Cholesky while 8·n² bytes stay under ``dense_limit_bytes``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_array, check_is_fitted


def rbf_block(
    rows: np.ndarray, columns: np.ndarray, gamma: float, columns_squared=None
) -> np.ndarray:
    """``exp(−γ ‖rows_i − columns_j‖²)``, shape ``(len(rows), len(columns))``, float64."""
    columns_squared = (
        np.einsum("ij,ij->i", columns, columns) if columns_squared is None else columns_squared
    )
    block = rows @ columns.T
    block *= -2.0
    block += np.einsum("ij,ij->i", rows, rows)[:, None]
    block += columns_squared[None, :]
    np.maximum(block, 0.0, out=block)  # rounding can make a squared distance slightly negative
    block *= -gamma
    return np.exp(block, out=block)


class KernelDistilledClassifier(ClassifierMixin, BaseEstimator):
    """An RBF kernel model over proxy points, fitted to a teacher's soft predictions (Guha eq. 3).

    Parameters
    ----------
    gamma : float or "scale"
        RBF width; "scale" is ``1 / (n_features · Var(X))`` as in scikit-learn's SVC.
    ridge : float ≥ 0
        Added to the kernel's diagonal; 0 solves eq. 3 exactly (the kernel must then be
        positive definite, which it is for distinct points up to rounding).
    solver : {"auto", "cholesky", "cg"}
    block_size : int
        Rows of the kernel computed at once (fill, conjugate gradient and prediction).
    dense_limit_bytes : int
        ``auto`` uses Cholesky while the n × n matrix fits in this many bytes.
    max_iter, tol : int, float
        Conjugate gradient: iterations and relative residual per class column.

    Attributes
    ----------
    support_vectors_ : (n_proxy, n_features) the proxy points; ``dual_coef_`` : (n_proxy, C);
    ``gamma_`` : the resolved width; ``solver_`` : the solver used; ``temperature_`` : τ of the
    softmax read-out; ``classes_`` = ``arange(C)``.
    """

    def __init__(
        self,
        gamma="scale",
        ridge=1e-6,
        solver="auto",
        block_size=1024,
        dense_limit_bytes=2**30,
        max_iter=1000,
        tol=1e-8,
    ):
        self.gamma = gamma
        self.ridge = ridge
        self.solver = solver
        self.block_size = block_size
        self.dense_limit_bytes = dense_limit_bytes
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y):
        """``y``: teacher probabilities ``(n, C)``, or class indices ``(n,)`` (taken as one-hot)."""
        X = check_array(X, dtype=np.float64)
        targets = np.asarray(y, dtype=np.float64)
        if targets.ndim == 1:
            targets = np.eye(int(targets.max()) + 1)[targets.astype(np.int64)]
        if len(targets) != len(X):
            raise ValueError(f"{len(X)} proxy points but {len(targets)} teacher predictions.")
        self.gamma_ = _resolve_gamma(self.gamma, X)
        self.support_vectors_ = X
        self.support_squared_norms_ = np.einsum("ij,ij->i", X, X)
        self.solver_ = self._pick_solver(len(X))
        solve = self._solve_cholesky if self.solver_ == "cholesky" else self._solve_cg
        self.dual_coef_ = solve(X, targets)
        # outputs on the proxy points: K α = F − ridge·α, no kernel needed
        self.temperature_ = fit_temperature(targets - self.ridge * self.dual_coef_, targets)
        self.classes_ = np.arange(targets.shape[1])
        self.n_features_in_ = X.shape[1]
        return self

    def _pick_solver(self, n: int) -> str:
        if self.solver not in ("auto", "cholesky", "cg"):
            raise ValueError(f"Unknown solver {self.solver!r}; use 'auto', 'cholesky' or 'cg'.")
        if self.solver != "auto":
            return self.solver
        return "cholesky" if 8 * n * n <= self.dense_limit_bytes else "cg"

    def _solve_cholesky(self, X: np.ndarray, targets: np.ndarray) -> np.ndarray:
        kernel = np.empty((len(X), len(X)))
        for start in range(0, len(X), self.block_size):
            kernel[start : start + self.block_size] = rbf_block(
                X[start : start + self.block_size], X, self.gamma_, self.support_squared_norms_
            )
        kernel.flat[:: len(X) + 1] += self.ridge
        try:
            # K is symmetric, so its transpose is the same matrix in Fortran order: LAPACK then
            # factorises it in place instead of copying a C-ordered array (8·n² more bytes)
            factor = cho_factor(kernel.T, lower=True, overwrite_a=True, check_finite=False)
        except LinAlgError as error:
            raise ValueError(
                "The proxy points' kernel matrix is not positive definite (duplicate points?); "
                "use a ridge > 0."
            ) from error
        return cho_solve(factor, targets, overwrite_b=False, check_finite=False)

    def _kernel_times(self, X: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        product = np.empty_like(vectors)
        for start in range(0, len(X), self.block_size):
            block = rbf_block(
                X[start : start + self.block_size], X, self.gamma_, self.support_squared_norms_
            )
            product[start : start + self.block_size] = block @ vectors
        return product + self.ridge * vectors

    def _solve_cg(self, X: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Conjugate gradient on every class column at once (each column its own step sizes)."""
        solution = np.zeros_like(targets)
        residual = targets.copy()
        direction = residual.copy()
        residual_norm = np.einsum("ij,ij->j", residual, residual)
        stop = (self.tol**2) * np.maximum(np.einsum("ij,ij->j", targets, targets), 1e-300)
        self.n_iter_ = 0
        for iteration in range(1, self.max_iter + 1):
            self.n_iter_ = iteration
            if np.all(residual_norm <= stop):
                break
            image = self._kernel_times(X, direction)
            step = residual_norm / np.maximum(np.einsum("ij,ij->j", direction, image), 1e-300)
            solution += direction * step
            residual -= image * step
            new_norm = np.einsum("ij,ij->j", residual, residual)
            direction = residual + direction * (new_norm / np.maximum(residual_norm, 1e-300))
            residual_norm = new_norm
        return solution

    def decision_function(self, X) -> np.ndarray:
        """The student's raw outputs ``Σ_j α'_j k(x'_j, x)``, shape ``(n, C)``, in row blocks."""
        check_is_fitted(self, "dual_coef_")
        X = check_array(X, dtype=np.float64)
        scores = np.empty((len(X), self.dual_coef_.shape[1]))
        for start in range(0, len(X), self.block_size):
            block = rbf_block(
                X[start : start + self.block_size],
                self.support_vectors_,
                self.gamma_,
                self.support_squared_norms_,
            )
            scores[start : start + self.block_size] = block @ self.dual_coef_
        return scores

    def predict_proba(self, X) -> np.ndarray:
        """``softmax(outputs / temperature_)`` per row."""
        return softmax(self.decision_function(X) / self.temperature_, axis=1)

    def predict(self, X) -> np.ndarray:
        """Arg-max of the raw outputs (ties to the lowest class)."""
        return np.argmax(self.decision_function(X), axis=1)


def fit_temperature(outputs: np.ndarray, teacher: np.ndarray) -> float:
    """τ > 0 minimising the cross-entropy from the teacher's rows to ``softmax(outputs / τ)``."""
    weights = teacher / np.maximum(teacher.sum(axis=1, keepdims=True), 1e-300)

    def cross_entropy(log_temperature: float) -> float:
        return float(-np.sum(weights * log_softmax(outputs / np.exp(log_temperature), axis=1)))

    return float(np.exp(minimize_scalar(cross_entropy, bounds=(-9.0, 5.0), method="bounded").x))


def _resolve_gamma(gamma, X: np.ndarray) -> float:
    if gamma == "scale":
        variance = X.var()
        return 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
    if (
        isinstance(gamma, bool)
        or not isinstance(gamma, (int, float, np.integer, np.floating))
        or gamma <= 0
    ):
        raise ValueError(f"gamma must be a positive number or 'scale', not {gamma!r}.")
    return float(gamma)
