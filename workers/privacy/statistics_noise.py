"""Example-level Gaussian noise on a silo's sufficient statistics (issue 40, the statistics kind), and its accounting.

A silo releases, for rows clipped to the norm C its federation sets and scaled by 1/C (so every row x has ‖x‖₂ ≤ 1),
four blocks of statistics (:mod:`workers.algorithms.sufficient_statistics`): per-class counts n_k, per-class sums
s_k = Σ x, the pooled second moment M = Σ x xᵀ (one matrix for all classes) and per-class squares q_k = Σ x ⊙ x.

Sensitivity, add/remove-one-record neighbours (one record is in one class): the counts move by 1 in one coordinate
(Δ = 1); the sums by x in one class (Δ = ‖x‖₂ ≤ 1); the second moment by x xᵀ, whose Frobenius norm is ‖x‖₂² ≤ 1
(the silo releases its upper triangle and mirrors it, a vector whose norm is at most that, Δ ≤ 1); the squares by
x ⊙ x in one class (Δ = (Σ xᵢ⁴)^½ ≤ ‖x‖₂² ≤ 1). Each block b gets independent Gaussian noise of standard deviation
σ_b, so one release is the Gaussian mechanism on the vector (n/σ_c, s/σ_s, M/σ_m, q/σ_q) with unit noise and L2
sensitivity (Σ_b 1/σ_b²)^½: its Rényi divergence at order α is α/2 · Σ_b 1/σ_b² (Mironov 2017, Prop. 7), which
is :func:`workers.privacy.rdp.gaussian_rdp` with the effective σ = (Σ_b 1/σ_b²)^−½ and shift 1. With σ the same
for every block of the three an LDA or ridge head needs (counts, sums, second moment), Δ/σ = √3/σ (docs/budgets.md,
"Sufficient statistics").

"Noise only what is needed": the blocks are not equally fragile. Counts are in the thousands and each head reads
them once; the second moment's d² entries carry the covariance every head inverts. So a release splits its Rényi
budget ρ = Σ_b 1/(2σ_b²) into shares p_b (σ_b = (2 p_b ρ)^−½), and a block no head reads is not released at all
(share 0, never noised, never sent). The shares are post-hoc weights of one Gaussian mechanism: the accounting is
the same whatever they are.

Noise is drawn by OpenDP's Gaussian sampler on floats (a cryptographically secure source), never seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.privacy.rdp import RENYI_ORDERS, epsilon_from_rdp, gaussian_rdp, validate_delta

#: The blocks of a silo's statistics, in the order they are released.
STATISTICS_BLOCKS = ("counts", "sums", "moment", "squares")
#: The default shares of the Rényi budget by block, chosen on Adult's validation rows (docs/results/statistics.md):
#: the second moment carries most of what LDA and ridge need, the counts (in the thousands) need little, and the
#: per-class squares, which only naive Bayes reads, are not released unless a silo asks (noise only what is needed).
DEFAULT_SHARES = {"counts": 0.02, "sums": 0.28, "moment": 0.7}
#: The shares when the squares are released too (naive Bayes).
SHARES_WITH_SQUARES = {"counts": 0.02, "sums": 0.22, "moment": 0.56, "squares": 0.2}


@dataclass(frozen=True)
class StatisticsNoise:
    """The Gaussian noise one silo adds to its statistics: a standard deviation per released block (in units of the
    scaled rows, ‖x‖₂ ≤ 1), ``None`` for a block it does not release, and the δ its ε is stated at."""

    counts: float | None
    sums: float | None
    moment: float | None
    squares: float | None
    delta: float

    def __post_init__(self):
        validate_delta(self.delta)
        released = [self.sigma_of(block) for block in STATISTICS_BLOCKS]
        if all(sigma is None for sigma in released):
            raise ValueError(
                "Statistics noise must give a standard deviation for at least one block."
            )
        for block, sigma in zip(STATISTICS_BLOCKS, released):
            if sigma is not None and not (
                isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0
            ):
                raise ValueError(
                    f"The noise on the {block} must be a positive finite standard deviation, got {sigma!r}."
                )

    def sigma_of(self, block: str) -> float | None:
        """The standard deviation on ``block`` (one of :data:`STATISTICS_BLOCKS`), None where it is not released."""
        return getattr(self, block)

    @property
    def effective_sigma(self) -> float:
        """σ of the equivalent unit-sensitivity Gaussian mechanism: (Σ_b 1/σ_b²)^−½ over the released blocks."""
        precision = sum(
            1 / sigma**2 for block in STATISTICS_BLOCKS if (sigma := self.sigma_of(block))
        )
        return 1 / math.sqrt(precision)

    def rdp(self, orders=RENYI_ORDERS) -> np.ndarray:
        """Rényi divergence (nats) of one release at each order α: α/(2 σ_eff²), example-level."""
        return gaussian_rdp(orders, sigma=self.effective_sigma, shift=1.0)

    @property
    def epsilon(self) -> float:
        """The example-level ε of one release at :attr:`delta`, from the Rényi curve at :data:`RENYI_ORDERS`."""
        return epsilon_from_rdp(RENYI_ORDERS, self.rdp(), delta=self.delta)[0]

    def as_dict(self) -> dict:
        """The declaration a silo uploads with its statistics (and the market recomputes ε from)."""
        return {
            "mechanism": "statistics_gaussian",
            "unit": "example",
            "sigmas": {block: self.sigma_of(block) for block in STATISTICS_BLOCKS},
            "delta": self.delta,
            "epsilon": self.epsilon,
        }

    @classmethod
    def from_dict(cls, declaration: dict) -> StatisticsNoise:
        """Read a declaration back; a ValueError names what is missing or wrong."""
        sigmas = declaration.get("sigmas") if isinstance(declaration, dict) else None
        if not isinstance(sigmas, dict) or set(sigmas) - set(STATISTICS_BLOCKS):
            raise ValueError(
                "A statistics noise declaration needs 'sigmas': the standard deviation on each of "
                f"{', '.join(STATISTICS_BLOCKS)} (null for a block not released), and 'delta'."
            )
        delta = declaration.get("delta")
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise ValueError(
                f"A statistics noise declaration needs its 'delta' as a number, got {delta!r}."
            )
        return cls(**{block: sigmas.get(block) for block in STATISTICS_BLOCKS}, delta=float(delta))


def statistics_noise_calibrated(
    *, epsilon: float, delta: float, shares: dict[str, float] | None = None
) -> StatisticsNoise:
    """The noise whose one release costs exactly ``epsilon`` (to 1e-9) at ``delta``, split by ``shares``.

    Parameters
    ----------
    epsilon : float
        Target example-level ε of one release, > 0.
    delta : float
        δ, in (0, 1).
    shares : dict of str to float, optional
        Share of the Rényi budget per block (:data:`DEFAULT_SHARES`); a block with share 0 or absent is not released.

    Returns
    -------
    StatisticsNoise
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"ε must be a positive number, got {epsilon!r}.")
    validate_delta(delta)
    shares = dict(DEFAULT_SHARES if shares is None else shares)
    unknown = set(shares) - set(STATISTICS_BLOCKS)
    if unknown or any(share < 0 for share in shares.values()) or sum(shares.values()) <= 0:
        raise ValueError(
            f"Noise shares are non-negative weights of the blocks {', '.join(STATISTICS_BLOCKS)}, not {shares!r}."
        )
    total = sum(shares.values())
    low, high = math.log(1e-4), math.log(1e6)  # bisect σ_eff on a log scale: ε falls as σ_eff grows
    for _ in range(200):
        middle = (low + high) / 2
        achieved = epsilon_from_rdp(
            RENYI_ORDERS, gaussian_rdp(RENYI_ORDERS, sigma=math.exp(middle), shift=1.0), delta=delta
        )[0]
        low, high = (middle, high) if achieved > epsilon else (low, middle)
    sigma_effective = math.exp(high)
    # σ_b = σ_eff / √(p_b / Σp): then Σ_b 1/σ_b² = 1/σ_eff².
    return StatisticsNoise(
        **{
            block: (
                sigma_effective / math.sqrt(shares[block] / total) if shares.get(block) else None
            )
            for block in STATISTICS_BLOCKS
        },
        delta=delta,
    )


def gaussian_noise_draw(shape: tuple[int, ...], *, sigma: float) -> np.ndarray:
    """Fresh, unseeded Gaussian noise of standard deviation ``sigma`` (OpenDP's float sampler), of ``shape``."""
    import opendp.prelude as dp  # only a silo that adds noise loads OpenDP

    dp.enable_features("contrib")
    size = int(np.prod(shape))
    if size == 0:
        return np.zeros(shape)
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), float(sigma)
    )
    return np.asarray(measurement([0.0] * size), dtype=np.float64).reshape(shape)
