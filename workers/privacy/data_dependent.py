"""Data-dependent privacy of noisy arg-max queries (PATE / FedKT), vectorised over queries.

A query releases only the arg-max of the noisy vote counts. When the true winner j* leads by a
wide margin, the noise almost never flips the answer, and the query costs much less than its
data-independent RDP. Everything here works on arrays of shape (n_queries, n_classes) and
(n_queries, n_orders), with no Python loop over queries.

* q, the probability that the noisy arg-max differs from j*, comes from
  :mod:`workers.privacy.flip_probability` (PATE Lemma 4's union bound, with the discrete
  noise's own tails, plus the probability that the winner's noisy count falls to ≤ 0: the
  engine answers that as an abstention and releases it through the training mask).
* Laplace: per-query log-moment bound of PATE Theorem 3 (FedKT Theorems 2–3), for an
  ε₀-pure-DP query, λ the moment order (= Rényi order − 1):
  α(λ) ≤ min(½ε₀²λ(λ+1), ε₀λ, log((1−q)((1−q)/(1−e^{ε₀}q))^λ + q·e^{ε₀λ})), the last term
  only when q < 1/(e^{ε₀}+1). The theorem holds for any ε₀-DP mechanism, so it holds for
  discrete Laplace noise with the same ε₀. We use it for real λ ≥ 1 only; below λ = 1 the
  data-independent curve is used.
* Gaussian (GNMax): Papernot et al. 2018, *Scalable Private Learning with PATE*, Prop. 7 (q)
  and Theorem 6 with the higher orders μ₂ = √(−log q / c), μ₁ = μ₂ + 1 of their Prop. 10,
  generalised to any data-independent RDP curve c·α (c = 1/σ² for their sensitivity √2).
  No smooth-sensitivity step: the bound is kept internally, as DESIGN.md asks.
"""

import numpy as np

from workers.privacy.flip_probability import (
    continuous_laplace_log_tail,
    discrete_laplace_log_tail,
    gaussian_noisy_max_log_q,
    laplace_noisy_max_log_q,
    union_bound_log_q,
    vote_gaps,
)
from workers.privacy.rdp import RENYI_ORDERS


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 − e^x) for x ≤ 0, stable on both ends."""
    x = np.minimum(x, -1e-300)
    return np.where(x < -0.693, np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


def pure_dp_log_moments(log_q, *, pure_epsilon: float, moment_orders) -> np.ndarray:
    """PATE Theorem 3: log-moment bounds α(λ) of one ε₀-DP arg-max query, given log q.

    α(λ) ≤ min(½ε₀²λ(λ+1), ε₀λ, log((1−q)((1−q)/(1−e^{ε₀}q))^λ + q·e^{ε₀λ})), the last term
    only where q < 1/(e^{ε₀}+1).

    Parameters
    ----------
    log_q : array_like of float, shape (n_queries,)
        Natural log of the bound q on Pr[answer ≠ j*].
    pure_epsilon : float
        ε₀ of one query (2sγ at FedKT L1, 2γ at L2), in nats.
    moment_orders : array_like of float, shape (n_orders,)
        Moment orders λ ≥ 1 (Rényi order − 1).

    Returns
    -------
    numpy.ndarray of float, shape (n_queries, n_orders)
        Log-moment bounds, in nats.
    """
    log_q = np.asarray(log_q, dtype=float)[:, None]
    lambdas = np.asarray(moment_orders, dtype=float)[None, :]
    independent = np.minimum(
        0.5 * pure_epsilon**2 * lambdas * (lambdas + 1), pure_epsilon * lambdas
    )
    valid = log_q < -np.log1p(np.exp(pure_epsilon))
    safe_log_q = np.where(valid, log_q, -np.inf)
    log_one_minus_q = np.log1p(-np.exp(safe_log_q))
    ratio = log_one_minus_q - _log1mexp(pure_epsilon + safe_log_q)
    dependent = np.logaddexp(log_one_minus_q + lambdas * ratio, safe_log_q + pure_epsilon * lambdas)
    return np.where(valid, np.minimum(independent, dependent), independent)


def laplace_log_moments(
    vote_counts, *, gamma: float, pure_epsilon: float, moment_orders, discrete: bool = False
) -> np.ndarray:
    """FedKT / PATE per-query log moments of the Laplace noisy arg-max (Theorems 2–3).

    This is the paper's per-query quantity: q from Lemma 4 (continuous, or discrete Laplace
    tails with ``discrete=True``), then :func:`pure_dp_log_moments`.

    Parameters
    ----------
    vote_counts : array_like of int, shape (n_classes,) or (n_queries, n_classes)
        Noiseless vote counts.
    gamma : float
        Inverse noise scale γ.
    pure_epsilon : float
        ε₀ of one query, in nats.
    moment_orders : array_like of float, shape (n_orders,)
        Moment orders λ ≥ 1.
    discrete : bool
        Use the discrete-Laplace tail (OpenDP's noise) instead of the continuous one.

    Returns
    -------
    numpy.ndarray of float, shape (n_orders,) or (n_queries, n_orders)
        Log-moment bound of each query at each order, in nats.
    """
    counts = np.asarray(vote_counts)
    gaps, winners = vote_gaps(np.atleast_2d(counts))
    tail = discrete_laplace_log_tail if discrete else continuous_laplace_log_tail
    log_q = union_bound_log_q(tail(gaps, gamma=gamma), winners)
    moments = pure_dp_log_moments(log_q, pure_epsilon=pure_epsilon, moment_orders=moment_orders)
    return moments[0] if counts.ndim == 1 else moments


def laplace_data_dependent_rdp(
    vote_counts: np.ndarray,
    *,
    gamma: float,
    vote_shift: int,
    independent_rdp: np.ndarray,
    orders=RENYI_ORDERS,
) -> np.ndarray:
    """Per-query data-dependent RDP of the discrete-Laplace noisy arg-max.

    Parameters
    ----------
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        Noiseless vote counts.
    gamma : float
        Noise parameter γ.
    vote_shift : int
        Votes one neighbour moves between two classes (s at L1, 1 at L2); ε₀ = 2·vote_shift·γ.
    independent_rdp : numpy.ndarray of float, shape (n_orders,)
        The exact data-independent per-query curve, a cap at every order.
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.

    Returns
    -------
    numpy.ndarray of float, shape (n_queries, n_orders)
        RDP of each query at each order, in nats; never above ``independent_rdp``.
    """
    orders = np.asarray(orders, dtype=float)
    log_q = laplace_noisy_max_log_q(vote_counts, gamma=gamma)
    lambdas = np.maximum(orders - 1, 1.0)
    moments = pure_dp_log_moments(log_q, pure_epsilon=2 * vote_shift * gamma, moment_orders=lambdas)
    dependent = np.where(orders >= 2, moments / lambdas, np.inf)
    return np.minimum(dependent, independent_rdp[None, :])


def gaussian_data_dependent_rdp(
    vote_counts: np.ndarray, *, sigma: float, rdp_slope: float, orders=RENYI_ORDERS
) -> np.ndarray:
    """Per-query data-dependent RDP of GNMax (Papernot et al. 2018, Theorem 6, Prop. 7 and 10).

    Parameters
    ----------
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        Noiseless vote counts.
    sigma : float
        Noise standard deviation σ, in votes (sets q).
    rdp_slope : float
        c in the data-independent curve RDP(α) = c·α (vote_shift²/σ² for the vote vector).
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.

    Returns
    -------
    numpy.ndarray of float, shape (n_queries, n_orders)
        RDP of each query at each order, in nats; never above c·α.
    """
    orders = np.asarray(orders, dtype=float)[None, :]
    log_q = gaussian_noisy_max_log_q(vote_counts, sigma=sigma)[:, None]
    independent = rdp_slope * orders
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu_high_2 = np.sqrt(-log_q / rdp_slope)
        mu_high_1 = mu_high_2 + 1
        rdp_high_1, rdp_high_2 = rdp_slope * mu_high_1, rdp_slope * mu_high_2
        q_small_enough = log_q <= (mu_high_2 - 1) * rdp_high_2 - mu_high_2 * (
            np.log1p(1 / (mu_high_1 - 1)) + np.log1p(1 / (mu_high_2 - 1))
        )
        valid = (mu_high_2 > 1) & q_small_enough & (-log_q > rdp_high_2) & (mu_high_1 > orders)
        safe_log_q = np.where(valid, log_q, -1.0)
        safe_mu_2 = np.where(valid, mu_high_2, 2.0)
        log_one_minus_q = _log1mexp(safe_log_q)
        log_a = (orders - 1) * (
            log_one_minus_q - _log1mexp((safe_log_q + rdp_slope * safe_mu_2) * (1 - 1 / safe_mu_2))
        )
        log_b = (orders - 1) * (np.where(valid, rdp_high_1, 0.0) - safe_log_q / (safe_mu_2))
        dependent = np.logaddexp(log_one_minus_q + log_a, safe_log_q + log_b) / (orders - 1)
    certain = np.isneginf(log_q)  # a fixed answer costs nothing
    result = np.where(valid, np.minimum(independent, dependent), independent)
    return np.where(certain, 0.0, result)
