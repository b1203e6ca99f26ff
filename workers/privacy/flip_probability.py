"""How likely noise is to flip a noisy arg-max: the q of PATE and FedKT, vectorised over queries.

q, the probability that the noisy arg-max differs from j*, is bounded by the union bound of
PATE (Papernot et al. 2017, *Semi-supervised knowledge transfer ...*, Lemma 4):
q ≤ Σ_{j≠j*} Pr[Z_j − Z_{j*} ≥ n_{j*} − n_j]. For continuous Laplace noise the tail is
(2 + γd)/(4e^{γd}). OpenDP samples *discrete* noise, so the engine uses the discrete
distributions' own tails: for discrete Laplace the closed form derived from
Pr[Z_1 − Z_2 = m] = c² r^{|m|} (B + |m|), r = e^{−γ}, c = (1−r)/(1+r), B = (1+r²)/(1−r²);
for the discrete Gaussian a log-space sum over its pmf. Ties count as flips (an arg-max that
breaks ties by index may pick the other class), so the gaps are used with ``≥``.

The noisy arg-max also *abstains* when the noisy maximum is ≤ 0 (the fit drops that row, and the
training mask it releases says so), so the answer is j* only when the winner also stays above 0:
q ≤ Σ_{j≠j*} Pr[Z_j − Z_{j*} ≥ n_{j*} − n_j] + Pr[Z_{j*} ≤ −n_{j*}]. The last term is the noise's
single tail (symmetric noise: Pr[Z ≥ n_{j*}]); :func:`laplace_noisy_max_log_q` and
:func:`gaussian_noisy_max_log_q` add it. Leaving it out understates q where the winner has few
votes (e^{−γn}/(1+e^{−γ}) for discrete Laplace).

Vote gaps are measured in votes, the unit the noise is added in. At FedKT L1 consistent votes
come in multiples of s and one party moves s of them: that enters ε₀ = 2sγ and the
data-independent curve through the vote shift, never by rescaling the gap (the gap in parties
times γ would understate q s-fold in the exponent).
"""

import numpy as np
from scipy.special import logsumexp

_MAX_TABLE_CELLS = 2_000_000


def vote_gaps(vote_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gap between the true winner's count and each class's count.

    Parameters
    ----------
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        Noiseless vote counts.

    Returns
    -------
    gaps : numpy.ndarray of int, shape (n_queries, n_classes)
        n_{j*} − n_j, in votes (0 for the winner itself).
    winners : numpy.ndarray of int, shape (n_queries,)
        j*, the arg-max (lowest index on ties).
    """
    winners = np.argmax(vote_counts, axis=1)
    top = np.take_along_axis(vote_counts, winners[:, None], axis=1)
    return top - vote_counts, winners


def continuous_laplace_log_tail(gaps, *, gamma: float) -> np.ndarray:
    """log Pr[Z₁ − Z₂ ≥ d] for two independent continuous Laplace(1/γ) noises, d ≥ 0 (Lemma 4)."""
    gaps = np.asarray(gaps, dtype=float)
    return np.log((2 + gamma * gaps) / 4) - gamma * gaps


def discrete_laplace_log_tail(gaps, *, gamma: float) -> np.ndarray:
    """log Pr[Z₁ − Z₂ ≥ d] for two independent discrete Laplace noises (pmf ∝ e^{−γ|k|}).

    Parameters
    ----------
    gaps : array_like of int
        Integer gaps d ≥ 0, in votes.
    gamma : float
        Noise parameter γ.

    Returns
    -------
    numpy.ndarray of float, same shape as ``gaps``
        Natural log of the tail probability (ties, Z₁ − Z₂ = d, included).
    """
    gaps = np.asarray(gaps, dtype=float)
    r = np.exp(-gamma)
    one_minus_r = -np.expm1(-gamma)
    b = (1 + r**2) / (one_minus_r * (1 + r))
    bracket = (b + gaps) / one_minus_r + r / one_minus_r**2
    return 2 * np.log(np.tanh(gamma / 2)) - gamma * gaps + np.log(bracket)


def discrete_laplace_log_survival(counts, *, gamma: float) -> np.ndarray:
    """log Pr[Z ≥ n] for one discrete Laplace noise Z (pmf ∝ e^{−γ|k|}), n an integer.

    With r = e^{−γ}: Pr[Z ≥ n] = r^n / (1 + r) for n ≥ 1, and 1 − r^{1−n} / (1 + r) for n ≤ 0
    (the pmf is (1−r)/(1+r)·r^{|k|}). By symmetry it is also Pr[Z ≤ −n].

    Parameters
    ----------
    counts : array_like of int
        Thresholds n, in votes.
    gamma : float
        Noise parameter γ.

    Returns
    -------
    numpy.ndarray of float, same shape as ``counts``
    """
    counts = np.asarray(counts, dtype=float)
    log_normaliser = np.log1p(np.exp(-gamma))
    upper = -gamma * np.maximum(counts, 1.0) - log_normaliser  # log(r^n/(1+r)) where n ≥ 1
    lower = np.log1p(
        -np.exp(-gamma * (1.0 - np.minimum(counts, 0.0)) - log_normaliser)
    )  # where n ≤ 0
    return np.where(counts >= 1, upper, lower)


def _discrete_gaussian_table(sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(support, log pmf, log Pr[Z ≥ support[i]]) over [−K, K], K ≈ 39σ; None when σ is too wide for a table."""
    half_width = int(np.ceil(39 * sigma)) + 1
    if 2 * half_width + 1 > _MAX_TABLE_CELLS:
        return None
    support = np.arange(-half_width, half_width + 1)
    log_pmf = -(support.astype(float) ** 2) / (2 * sigma**2)
    log_pmf -= logsumexp(log_pmf)
    return support, log_pmf, np.logaddexp.accumulate(log_pmf[::-1])[::-1]


def discrete_gaussian_log_survival(counts, *, sigma: float) -> np.ndarray:
    """log Pr[Z ≥ n] for one discrete Gaussian noise Z (pmf ∝ e^{−k²/2σ²}), n an integer.

    From the pmf table of :func:`discrete_gaussian_log_tail`; for very wide noise the σ²-subgaussian
    bound exp(−n²/2σ²) for n > 0 (and 1 otherwise). By symmetry it is also Pr[Z ≤ −n].

    Parameters
    ----------
    counts : array_like of int
        Thresholds n, in votes.
    sigma : float
        Noise scale σ, in votes.

    Returns
    -------
    numpy.ndarray of float, same shape as ``counts``
    """
    counts = np.asarray(counts, dtype=np.int64)
    table = _discrete_gaussian_table(sigma)
    if table is None:
        return np.where(counts > 0, -(counts.astype(float) ** 2) / (2 * sigma**2), 0.0)
    support, _, log_survival = table
    index = counts + support[-1]
    inside = log_survival[np.clip(index, 0, support.size - 1)]
    return np.where(index < 0, 0.0, np.where(index >= support.size, -np.inf, inside))


def discrete_gaussian_log_tail(gaps, *, sigma: float) -> np.ndarray:
    """log Pr[Z₁ − Z₂ ≥ d] for two independent discrete Gaussian noises (pmf ∝ e^{−k²/2σ²}).

    Computed as log Σ_k p(k)·Pr[Z₁ ≥ d + k] in log space over k ∈ [−K, K], K ≈ 39σ, where the
    neglected mass is below e^{−750} (it underflows to zero in double precision). For σ above
    about 25,000 votes the sub-Gaussian bound exp(−d²/4σ²) is used instead.

    Parameters
    ----------
    gaps : array_like of int
        Integer gaps d ≥ 0, in votes.
    sigma : float
        Noise scale σ of the discrete Gaussian, in votes.

    Returns
    -------
    numpy.ndarray of float, same shape as ``gaps``
        Natural log of the tail probability (ties included).
    """
    gaps = np.asarray(gaps, dtype=np.int64)
    table = _discrete_gaussian_table(sigma)
    if table is None:
        # Very wide noise: the discrete Gaussian is σ²-subgaussian (Canonne, Kamath, Steinke
        # 2020), so Z₁ − Z₂ is 2σ²-subgaussian and Pr[Z₁ − Z₂ ≥ d] ≤ exp(−d²/4σ²).
        return -(gaps.astype(float) ** 2) / (4 * sigma**2)
    support, log_pmf, log_survival = table  # log_survival[i] = log Pr[Z ≥ support[i]]
    half_width = support[-1]
    unique_gaps, inverse = np.unique(gaps, return_inverse=True)
    rows_per_chunk = max(1, _MAX_TABLE_CELLS // support.size)
    log_tails = np.empty(unique_gaps.size)
    for start in range(0, unique_gaps.size, rows_per_chunk):
        chunk = unique_gaps[start : start + rows_per_chunk]
        index = chunk[:, None] + support[None, :] + half_width
        inside = np.clip(index, 0, support.size - 1)
        log_survival_at = np.where(index < 0, 0.0, log_survival[inside])
        log_survival_at = np.where(index >= support.size, -np.inf, log_survival_at)
        log_tails[start : start + rows_per_chunk] = logsumexp(log_pmf + log_survival_at, axis=1)
    return log_tails[inverse].reshape(gaps.shape)


def union_bound_log_q(
    log_tails: np.ndarray, winners: np.ndarray, log_abstention=None
) -> np.ndarray:
    """log q, q = min(1, Σ_{j≠j*} tail_j [+ abstention]): PATE Lemma 4's bound on Pr[answer ≠ j*].

    Parameters
    ----------
    log_tails : numpy.ndarray of float, shape (n_queries, n_classes)
        log Pr[class j's noisy count reaches the winner's].
    winners : numpy.ndarray of int, shape (n_queries,)
        Index j* of the true winner per query.
    log_abstention : numpy.ndarray of float, shape (n_queries,), optional
        log Pr[the winner's noisy count is ≤ 0], when a noisy maximum ≤ 0 is answered as an abstention.

    Returns
    -------
    numpy.ndarray of float, shape (n_queries,)
        log q ≤ 0 (−inf when there is a single class and no abstention term).
    """
    log_tails = np.array(log_tails, dtype=float)
    np.put_along_axis(log_tails, winners[:, None], -np.inf, axis=1)
    log_q = logsumexp(log_tails, axis=1)
    if log_abstention is not None:
        log_q = np.logaddexp(log_q, np.asarray(log_abstention, dtype=float))
    return np.minimum(log_q, 0.0)


def _winner_counts(vote_counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = np.asarray(vote_counts)
    gaps, winners = vote_gaps(counts)
    return gaps, winners, np.take_along_axis(counts, winners[:, None], axis=1)[:, 0]


def laplace_noisy_max_log_q(vote_counts, *, gamma: float) -> np.ndarray:
    """log q of the discrete-Laplace noisy arg-max that abstains when the noisy maximum is ≤ 0.

    q ≤ Σ_{j≠j*} Pr[Z_j − Z_{j*} ≥ n_{j*} − n_j] + Pr[Z_{j*} ≥ n_{j*}] (module docstring).

    Parameters
    ----------
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        Noiseless vote counts.
    gamma : float
        Noise parameter γ.

    Returns
    -------
    numpy.ndarray of float, shape (n_queries,)
    """
    gaps, winners, top = _winner_counts(vote_counts)
    return union_bound_log_q(
        discrete_laplace_log_tail(gaps, gamma=gamma),
        winners,
        discrete_laplace_log_survival(top, gamma=gamma),
    )


def gaussian_noisy_max_log_q(vote_counts, *, sigma: float) -> np.ndarray:
    """log q of the discrete-Gaussian noisy arg-max (GNMax) that abstains when the noisy maximum is ≤ 0.

    Parameters
    ----------
    vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)
        Noiseless vote counts.
    sigma : float
        Noise scale σ, in votes.

    Returns
    -------
    numpy.ndarray of float, shape (n_queries,)
    """
    gaps, winners, top = _winner_counts(vote_counts)
    return union_bound_log_q(
        discrete_gaussian_log_tail(gaps, sigma=sigma),
        winners,
        discrete_gaussian_log_survival(top, sigma=sigma),
    )
