"""Data-independent Rényi-DP curves of the noisy vote counts, and the RDP → (ε, δ) conversion.

Every curve is the Rényi divergence D_α(M(D) ‖ M(D')) of *one query* (one noisy vote-count
vector) between neighbouring datasets, for each order α in ``orders``; it is in nats.

Neighbouring relation: a neighbour moves ``vote_shift`` votes out of one class and into
another (FedKT L1: one party's ``s`` consistent votes; L2: one record changes one teacher's
vote, a shift of 1). The count vector changes by ``+vote_shift`` in one coordinate and
``-vote_shift`` in another; each coordinate carries independent noise, so the RDP of the
vector is twice the RDP of one scalar coordinate shifted by ``vote_shift``. (Treating it as
a single coordinate shifted by ``2·vote_shift`` would be looser: the scalar RDP curves below
are convex in the shift.)

Curves:

* continuous Laplace of scale 1/γ: Mironov (2017), *Rényi Differential Privacy*, Prop. 6;
* discrete Laplace, pmf ∝ exp(−γ|k|), the distribution OpenDP samples on integers: the
  exact Rényi divergence, the sum over the integers evaluated in closed form (three geometric
  series: k ≤ 0, 0 < k < Δ, k ≥ Δ). It is a few percent larger than the continuous curve
  because all its mass sits where the privacy loss is extreme;
* (discrete) Gaussian of standard deviation σ: α·Δ²/(2σ²) per coordinate. It is exact for
  the continuous Gaussian and an upper bound for the discrete Gaussian of Canonne, Kamath and
  Steinke (2020), *The Discrete Gaussian for Differential Privacy*, Prop. 5/Thm. 4.

Conversion to (ε, δ): Canonne, Kamath, Steinke (2020) Prop. 12 / Balle et al. (2020)
*Hypothesis testing interpretations and Rényi DP* Thm. 21:
ε = RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1), minimised over the order grid. It is never
looser than Mironov's ε = RDP(α) + log(1/δ)/(α−1), and it is what ``dp-accounting`` uses.
"""

import numpy as np

#: Rényi orders α used everywhere: 200 geometric steps of α − 1 from 0.02 to 10,000, plus the
#: integers 2…64. A wide, fine grid, so that ε is not floored by a short list of integer orders
#: (8 integer moments floor ε at ln(1/δ)/8 ≈ 1.44 for δ = 1e-5).
RENYI_ORDERS = np.unique(
    np.concatenate([1.0 + np.geomspace(0.02, 10_000.0, 200), np.arange(2.0, 65.0)])
)


def _as_orders(orders) -> np.ndarray:
    orders = np.asarray(orders, dtype=float)
    if np.any(orders <= 1.0):
        raise ValueError("Rényi orders must all be greater than 1.")
    return orders


def continuous_laplace_rdp(orders, *, gamma: float, shift: float) -> np.ndarray:
    """Rényi divergence of one continuous Laplace coordinate of scale 1/γ shifted by ``shift``.

    Mironov (2017), Prop. 6: D_α = 1/(α−1) · log(α/(2α−1)·e^{(α−1)x} + (α−1)/(2α−1)·e^{−αx}),
    x = γ·shift.

    Parameters
    ----------
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.
    gamma : float
        Inverse noise scale γ (noise density ∝ exp(−γ|z|)).
    shift : float
        How far the mean moves between neighbours (the sensitivity of the coordinate).

    Returns
    -------
    numpy.ndarray of float, shape (n_orders,)
        D_α in nats.
    """
    orders = _as_orders(orders)
    x = gamma * shift
    log_first = np.log(orders / (2 * orders - 1)) + (orders - 1) * x
    log_second = np.log((orders - 1) / (2 * orders - 1)) - orders * x
    return np.logaddexp(log_first, log_second) / (orders - 1)


def discrete_laplace_rdp(orders, *, gamma: float, shift: int) -> np.ndarray:
    """Rényi divergence of one discrete Laplace coordinate (pmf ∝ e^{−γ|k|}) shifted by ``shift``.

    Exact: D_α = 1/(α−1) · log Σ_k p(k)^α p(k − Δ)^{1−α}, with the sum split into the
    geometric series over k ≤ 0, 0 < k < Δ and k ≥ Δ and evaluated in log space.

    Parameters
    ----------
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.
    gamma : float
        Noise parameter γ (OpenDP's ``make_laplace`` on integers with scale 1/γ).
    shift : int
        Integer shift Δ ≥ 1 of the mean between neighbours.

    Returns
    -------
    numpy.ndarray of float, shape (n_orders,)
        D_α in nats.
    """
    orders = _as_orders(orders)
    log_normaliser = np.log1p(np.exp(-gamma))  # log((1+r)) after cancelling 1/(1−r)
    log_left = gamma * (orders - 1) * shift - log_normaliser  # k ≤ 0
    log_right = -gamma * orders * shift - log_normaliser  # k ≥ Δ
    log_total = np.logaddexp(log_left, log_right)
    if shift >= 2:  # 0 < k < Δ: e^{γ(α−1)Δ} Σ_{k=1}^{Δ−1} u^k, u = e^{−γ(2α−1)}
        log_u = -gamma * (2 * orders - 1)
        log_series = log_u + np.log(-np.expm1((shift - 1) * log_u)) - np.log(-np.expm1(log_u))
        log_middle = gamma * (orders - 1) * shift + log_series + np.log(np.tanh(gamma / 2))
        log_total = np.logaddexp(log_total, log_middle)
    return np.maximum(log_total, 0.0) / (orders - 1)


def gaussian_rdp(orders, *, sigma: float, shift: float) -> np.ndarray:
    """Rényi divergence bound α·shift²/(2σ²) of one (discrete) Gaussian coordinate.

    Parameters
    ----------
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.
    sigma : float
        Noise standard deviation σ (in votes).
    shift : float
        How far the mean moves between neighbours.

    Returns
    -------
    numpy.ndarray of float, shape (n_orders,)
        D_α in nats (exact for continuous, an upper bound for discrete Gaussian noise).
    """
    orders = _as_orders(orders)
    return orders * shift**2 / (2 * sigma**2)


def epsilon_from_rdp(orders, rdp, *, delta: float) -> tuple[float, float]:
    """Convert a composed RDP curve into (ε, δ)-DP, minimising over the orders.

    Uses ε = RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1) (Canonne, Kamath, Steinke 2020,
    Prop. 12); ε = 0 where δ ≥ √(1 − e^{−RDP}) already.

    Parameters
    ----------
    orders : array_like of float, shape (n_orders,)
        Rényi orders α > 1.
    rdp : array_like of float, shape (n_orders,)
        Composed Rényi divergence at each order, in nats.
    delta : float
        Target δ, in (0, 1).

    Returns
    -------
    (float, float)
        ε in nats, and the order α at which it is attained.
    """
    rdp = np.asarray(rdp, dtype=float)
    epsilons = np.where(
        delta**2 + np.expm1(-rdp) > 0, 0.0, conversion_epsilons(orders, rdp, delta=delta)
    )
    best = int(np.argmin(epsilons))
    return max(0.0, float(epsilons[best])), float(orders[best])


def conversion_epsilons(orders, rdp, *, delta: float) -> np.ndarray:
    """The conversion's ε at each order, before the (0, δ) clause and the clamp at 0 of :func:`epsilon_from_rdp`:
    RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1). It can be negative; it grows one for one with the curve."""
    orders = _as_orders(orders)
    validate_delta(delta)
    return (
        np.asarray(rdp, dtype=float)
        + np.log1p(-1 / orders)
        - (np.log(delta) + np.log(orders)) / (orders - 1)
    )


def validate_delta(delta: float) -> None:
    """Raise a ValueError unless 0 < δ < 1."""
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValueError(f"δ must be a number strictly between 0 and 1, got {delta!r}.")
