"""Closed-form heads fitted from sufficient statistics alone (issue 40): LDA, ridge and Gaussian naive Bayes.

Each is the centralised fit on the pooled clipped rows, written in the statistics of
:mod:`workers.algorithms.sufficient_statistics` (n = Σ n_k, rows scaled to ‖x‖₂ ≤ 1):

- **LDA** (Hastie, Tibshirani, Friedman, *ESL* §4.3, eq. 4.10; scikit-learn's ``lsqr`` solver): class means
  μ_k = s_k / n_k, pooled within-class covariance Σ = (M − Σ_k s_k s_kᵀ / n_k + λI) / n, scores
  x Σ⁻¹ μ_k − ½ μ_k Σ⁻¹ μ_k + log(n_k / n), probabilities their softmax;
- **ridge** on one-hot targets (*ESL* eq. 3.44, intercept unpenalised as in scikit-learn's ``Ridge``): with
  x̄ = Σ_k s_k / n and ȳ = n_k / n, W = (M − n x̄ x̄ᵀ + λI)⁻¹ (Sᵀ − n x̄ ȳᵀ), b = ȳ − x̄ W, scores x W + b
  (probabilities: the scores clipped at 0 and normalised);
- **Gaussian naive Bayes** (scikit-learn's ``GaussianNB``): per-class means μ_k and variances q_k / n_k − μ_k²,
  plus 1e-9 times the largest pooled variance (diag(M) / n − x̄²), floored at ``variance_floor``.

At L0 (λ = 0, no floor) they equal scikit-learn's fits on the pooled rows to rounding. On L2 statistics (each silo's
Gaussian noise, :func:`workers.algorithms.sufficient_statistics.statistics_noised`) counts are floored at 1 and
λ, the variance floor keep the noisy matrices invertible: post-processing, no extra privacy cost.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin

from workers.algorithms.sufficient_statistics import (
    ClassStatistics,
    class_statistics,
    clipped_scaled,
)

#: The heads, by the name a job gives.
HEADS = ("lda", "ridge", "naive_bayes")
#: scikit-learn's GaussianNB default: this fraction of the largest feature variance is added to every variance.
VAR_SMOOTHING = 1e-9
#: λ of a head on exact (L0) statistics: a ridge's usual small penalty; the LDA and ridge heads equal their
#: centralised fits at the same λ.
EXACT_REGULARIZATION = 1.0
#: κ of λ = κ · σ_total for heads on noisy (L2) statistics, chosen on Adult's validation rows at 1, 4 and 10 silos
#: (docs/results/statistics.md: the only κ of 3, 6, 10, 20 within 1 point of L0 everywhere).
NOISE_REGULARIZATION_FACTOR = 10.0


class StatisticsHead(ClassifierMixin, BaseEstimator):
    """A closed-form classifier fitted from :class:`ClassStatistics` (``fit_statistics``) or from rows (``fit``).

    Parameters
    ----------
    head : {"lda", "ridge", "naive_bayes"}
    regularization : float
        λ ≥ 0 added to the diagonal of the scatter matrix (LDA, ridge), in units of the scaled rows.
    variance_floor : float
        Smallest per-feature variance naive Bayes uses (0 at L0).
    clip_norm : float
        C of the rows ``fit`` and ``predict_proba`` read (statistics carry their own).
    positive : bool
        Project the scatter matrix onto the positive semi-definite cone (its negative eigenvalues set to 0) before λ
        is added: noisy statistics (L2) give an indefinite matrix, which a true scatter never is.
    """

    def __init__(
        self,
        head: str = "lda",
        regularization: float = 0.0,
        variance_floor: float = 0.0,
        clip_norm: float = 1.0,
        positive: bool = False,
    ):
        self.head = head
        self.regularization = regularization
        self.variance_floor = variance_floor
        self.clip_norm = clip_norm
        self.positive = positive

    def fit(self, X, y):
        """Fit on rows (they are clipped and scaled first), labels ``0..K-1``."""
        y = np.asarray(y, dtype=np.int64)
        return self.fit_statistics(
            class_statistics(X, y, n_classes=int(y.max()) + 1, clip_norm=self.clip_norm)
        )

    def fit_statistics(self, statistics: ClassStatistics):
        """Fit from a federation's summed statistics; returns ``self``."""
        if self.head not in HEADS:
            raise ValueError(f"Unknown head {self.head!r}; known: {', '.join(HEADS)}.")
        self.classes_ = np.arange(statistics.n_classes)
        self.n_features_in_ = statistics.n_features
        self.clip_norm_ = statistics.clip_norm
        counts = np.maximum(statistics.counts, 1.0)
        fit = {"lda": _lda, "ridge": _ridge, "naive_bayes": _naive_bayes}[self.head]
        self.coef_, self.intercept_, self.variances_ = fit(statistics, counts, self)
        return self

    def decision_function(self, X) -> np.ndarray:
        """Scores ``(n_rows, K)`` of raw encoded rows (clipped and scaled as at fit)."""
        scaled = clipped_scaled(X, clip_norm=self.clip_norm_)
        if self.head != "naive_bayes":
            return scaled @ self.coef_.T + self.intercept_
        squared = ((scaled[:, None, :] - self.coef_[None]) ** 2 / self.variances_[None]).sum(axis=2)
        return self.intercept_ - 0.5 * squared

    def predict_proba(self, X) -> np.ndarray:
        scores = self.decision_function(X)
        if self.head == "ridge":
            positive = np.clip(scores, 1e-6, None)
            return positive / positive.sum(axis=1, keepdims=True)
        if self.head == "naive_bayes":
            return np.exp(scores - logsumexp(scores, axis=1, keepdims=True))
        return softmax(scores, axis=1)

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]


def _lda(statistics: ClassStatistics, counts: np.ndarray, head: StatisticsHead):
    n = counts.sum()
    means = statistics.sums / counts[:, None]
    scatter = _regularized(statistics.moment - (statistics.sums.T / counts) @ statistics.sums, head)
    covariance = scatter / n
    coef = linalg.lstsq(covariance, means.T)[
        0
    ].T  # scikit-learn's lsqr solver: least squares, rank-safe
    intercept = -0.5 * np.einsum("kd,kd->k", means, coef) + np.log(counts / n)
    return coef, intercept, None


def _ridge(statistics: ClassStatistics, counts: np.ndarray, head: StatisticsHead):
    n = counts.sum()
    feature_mean = statistics.sums.sum(axis=0) / n
    target_mean = counts / n
    gram = statistics.moment - n * np.outer(feature_mean, feature_mean)
    cross = statistics.sums.T - n * np.outer(feature_mean, target_mean)
    weights = linalg.solve(_regularized(gram, head), cross, assume_a="sym")
    return weights.T, target_mean - feature_mean @ weights, None


def _regularized(scatter: np.ndarray, head: StatisticsHead) -> np.ndarray:
    """The scatter matrix, projected onto the PSD cone when ``head.positive``, plus λI."""
    if head.positive:
        values, vectors = np.linalg.eigh((scatter + scatter.T) / 2)
        scatter = (vectors * np.maximum(values, 0.0)) @ vectors.T
    return scatter + head.regularization * np.eye(len(scatter))


def _naive_bayes(statistics: ClassStatistics, counts: np.ndarray, head: StatisticsHead):
    if statistics.squares is None:
        raise ValueError(
            "Naive Bayes reads the per-class squares, which these statistics do not hold."
        )
    n = counts.sum()
    means = statistics.sums / counts[:, None]
    pooled_mean = statistics.sums.sum(axis=0) / n
    pooled_variance = np.diag(statistics.moment) / n - pooled_mean**2
    variances = statistics.squares / counts[:, None] - means**2
    variances = np.maximum(variances + VAR_SMOOTHING * pooled_variance.max(), head.variance_floor)
    if not np.all(variances > 0):
        raise ValueError("A feature has no variance in a class; give naive Bayes a variance floor.")
    intercept = np.log(counts / n) - 0.5 * np.log(2 * np.pi * variances).sum(axis=1)
    return means, intercept, variances


def noise_scaled_regularization(*, moment_sigmas, factor: float) -> float:
    """λ for heads fitted on noisy statistics: ``factor`` times the standard deviation of one entry of the summed
    second moment's noise, (Σ_i σ_i²)^½ over the silos' declared σ (public: their declarations state them).

    The noise matrix's eigenvalues grow with that deviation (its spectral norm is about 2σ√d), so a λ in its units
    keeps the regularised scatter invertible whatever the number of silos."""
    sigmas = np.asarray(list(moment_sigmas), dtype=np.float64)
    if not len(sigmas) or np.any(sigmas <= 0) or not factor > 0:
        raise ValueError(
            "Give every silo's positive noise σ on the second moment and a positive factor."
        )
    return float(factor * np.sqrt(np.sum(sigmas**2)))


def statistics_head_fitted(
    statistics: ClassStatistics, *, head: str, moment_sigmas=()
) -> StatisticsHead:
    """The head a statistics job fits on the federation's summed statistics.

    Parameters
    ----------
    statistics : ClassStatistics
        The sum of the silos' statistics.
    head : str
        One of :data:`HEADS`.
    moment_sigmas : sequence of float
        Each noisy silo's declared σ on the second moment (empty at L0): with any, the scatter is projected onto
        the PSD cone and λ = :data:`NOISE_REGULARIZATION_FACTOR` · (Σ σ²)^½; without, λ =
        :data:`EXACT_REGULARIZATION`.
    """
    sigmas = list(moment_sigmas)
    if not sigmas:
        return StatisticsHead(head, regularization=EXACT_REGULARIZATION).fit_statistics(statistics)
    regularization = noise_scaled_regularization(
        moment_sigmas=sigmas, factor=NOISE_REGULARIZATION_FACTOR
    )
    return StatisticsHead(
        head, regularization=regularization, variance_floor=1e-3, positive=True
    ).fit_statistics(statistics)
