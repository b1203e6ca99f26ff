"""Noise mechanisms for integer vote counts: discrete Laplace (FedKT, PATE) and discrete Gaussian (GNMax).

Noise comes from OpenDP's samplers (``make_laplace`` / ``make_gaussian`` on an i64 vector
domain), which draw from a cryptographically secure source. It is never seeded and never
reproducible: DP noise is not an experiment knob (DESIGN.md, "Privacy semantics").

Each mechanism also knows its own privacy curves, so the accountant composes any mechanism
without branching on its kind:

* :class:`LaplaceNoise` — discrete Laplace, pmf ∝ e^{−γ|k|} (OpenDP scale 1/γ). FedKT's
  mechanism (Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting*,
  Algorithm 1), PATE's LNMax.
* :class:`GaussianNoise` — discrete Gaussian of scale σ (Canonne, Kamath, Steinke 2020); the
  GNMax aggregator of Papernot et al. 2018, *Scalable Private Learning with PATE*.
* :class:`ConfidentGaussianNoise` — Confident-GNMax (Papernot et al. 2018, Algorithm 1): a noisy consensus
  check (the largest count plus discrete Gaussian noise of scale σ₁ must reach the threshold T) and GNMax of
  scale σ₂ on the queries that pass; the others are withheld (:data:`WITHHELD`).
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import opendp.prelude as dp

from workers.privacy import data_dependent, rdp

dp.enable_features("contrib")


def _validate_positive(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"The noise parameter {name} must be a number, got {value!r}.")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"The noise parameter {name} must be positive and finite, got {value!r}.")


def validate_vote_counts(vote_counts) -> np.ndarray:
    """Return ``vote_counts`` as int64 after checking it is a 2-D integer array.

    Parameters
    ----------
    vote_counts : array_like of int, shape (n_queries, n_classes)
        Vote counts, one row per queried public example.

    Returns
    -------
    numpy.ndarray of int64, shape (n_queries, n_classes)
    """
    counts = np.asarray(vote_counts)
    if counts.ndim != 2:
        raise ValueError(
            f"Vote counts must be a 2-D array (queries × classes), got {counts.ndim} dimension(s)."
        )
    if counts.size and not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"Vote counts must be integers, got an array of {counts.dtype}.")
    return counts.astype(np.int64, copy=False)


#: The value of every count of a query Confident-GNMax withheld (its noisy consensus check failed): no noise
#: draw reaches it, and the arg-max labelling reads the row as an abstention (its largest count is ≤ 0).
WITHHELD = np.iinfo(np.int64).min


def _sample(measurement, counts: np.ndarray) -> np.ndarray:
    if counts.size == 0:
        return counts.copy()
    noisy = measurement(counts.ravel().tolist())  # one OpenDP call for the whole array
    return np.asarray(noisy, dtype=np.int64).reshape(counts.shape)


@dataclass(frozen=True)
class LaplaceNoise:
    """Discrete Laplace noise of scale 1/γ added to every integer vote count.

    Parameters
    ----------
    gamma : float
        γ > 0; the noise pmf is ∝ exp(−γ|k|). Larger γ means less noise and more ε.
    """

    gamma: float
    name: ClassVar[str] = "laplace"

    def __post_init__(self):
        _validate_positive(self.gamma, "gamma")

    def noisy_counts(self, vote_counts: np.ndarray) -> np.ndarray:
        """Add fresh, unseeded discrete Laplace noise to each count.

        Parameters
        ----------
        vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)

        Returns
        -------
        numpy.ndarray of int64, shape (n_queries, n_classes)
            Noisy counts (they may be negative).
        """
        counts = validate_vote_counts(vote_counts)
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
        return _sample(dp.m.make_laplace(*space, scale=1.0 / self.gamma), counts)

    @property
    def parameters(self) -> dict:
        """The noise parameters, labelled: ``{"gamma": γ, "sigma": None}``."""
        return {"gamma": float(self.gamma), "sigma": None}

    def query_rdp(self, orders, *, vote_shift: int) -> np.ndarray:
        """Data-independent RDP of one noisy count vector, shape (n_orders,), in nats.

        A neighbour moves ``vote_shift`` votes from one class to another: two coordinates
        shift by ``vote_shift``, so the curve is twice the exact scalar discrete-Laplace one.
        """
        return 2 * rdp.discrete_laplace_rdp(orders, gamma=self.gamma, shift=vote_shift)

    def data_dependent_query_rdp(
        self, vote_counts: np.ndarray, orders, *, vote_shift: int
    ) -> np.ndarray:
        """Data-dependent RDP of each noisy arg-max query, shape (n_queries, n_orders), in nats."""
        return data_dependent.laplace_data_dependent_rdp(
            vote_counts,
            gamma=self.gamma,
            vote_shift=vote_shift,
            independent_rdp=self.query_rdp(orders, vote_shift=vote_shift),
            orders=orders,
        )


@dataclass(frozen=True)
class GaussianNoise:
    """Discrete Gaussian noise of scale σ added to every vote count (GNMax).

    Parameters
    ----------
    sigma : float
        σ > 0, in votes: the pmf is ∝ exp(−k²/2σ²), whose standard deviation is σ up to a
        negligible difference once σ ≳ 1. Larger σ means more noise and less ε.
    """

    sigma: float
    name: ClassVar[str] = "gaussian"

    def __post_init__(self):
        _validate_positive(self.sigma, "sigma")

    def noisy_counts(self, vote_counts: np.ndarray) -> np.ndarray:
        """Add fresh, unseeded discrete Gaussian noise to each count.

        Parameters
        ----------
        vote_counts : numpy.ndarray of int, shape (n_queries, n_classes)

        Returns
        -------
        numpy.ndarray of int64, shape (n_queries, n_classes)
            Noisy counts (they may be negative).
        """
        return discrete_gaussian(validate_vote_counts(vote_counts), sigma=self.sigma)

    @property
    def parameters(self) -> dict:
        """The noise parameters, labelled: ``{"gamma": None, "sigma": σ}``."""
        return {"gamma": None, "sigma": float(self.sigma)}

    def query_rdp(self, orders, *, vote_shift: int) -> np.ndarray:
        """Data-independent RDP α·vote_shift²/σ² of one noisy count vector (L2 sensitivity √2·shift)."""
        return 2 * rdp.gaussian_rdp(orders, sigma=self.sigma, shift=vote_shift)

    def data_dependent_query_rdp(
        self, vote_counts: np.ndarray, orders, *, vote_shift: int
    ) -> np.ndarray:
        """Data-dependent RDP of each GNMax query, shape (n_queries, n_orders), in nats."""
        return data_dependent.gaussian_data_dependent_rdp(
            vote_counts, sigma=self.sigma, rdp_slope=vote_shift**2 / self.sigma**2, orders=orders
        )


def discrete_gaussian(counts: np.ndarray, *, sigma: float) -> np.ndarray:
    """``counts`` (int64) plus fresh, unseeded discrete Gaussian noise of scale σ on every entry (OpenDP)."""
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
    return _sample(dp.m.make_gaussian(*space, scale=float(sigma)), counts)


@dataclass(frozen=True)
class ConfidentGaussianNoise:
    """Confident-GNMax (Papernot et al. 2018, *Scalable Private Learning with PATE*, Algorithm 1).

    For each candidate query: if max_j n_j + N(0, σ₁²) ≥ T, answer arg-max_j (n_j + N(0, σ₂²)) (GNMax); else
    withhold it (every count :data:`WITHHELD`). Both draws are discrete Gaussian (OpenDP, unseeded).

    Parameters
    ----------
    sigma : float
        σ₂ > 0, the GNMax noise of the answers, in votes.
    threshold : float
        T > 0, in votes: the noisy largest count a query needs to be answered.
    sigma_threshold : float
        σ₁ > 0, the noise of the consensus check, in votes.

    Accounting (data-independent, :meth:`query_rdp`): every candidate pays the check (one scalar Gaussian of
    sensitivity Δ: a party moving Δ votes moves the largest count by at most Δ) and, since whether it is
    answered depends on the data, the GNMax answer too (adaptive composition: the answered branch costs the
    most). No data-dependent bound is released for it (docs/budgets.md).
    """

    sigma: float
    threshold: float
    sigma_threshold: float
    name: ClassVar[str] = "confident_gnmax"

    def __post_init__(self):
        _validate_positive(self.sigma, "sigma")
        _validate_positive(self.threshold, "threshold")
        _validate_positive(self.sigma_threshold, "sigma_threshold")

    def draw(self, counts: np.ndarray, *, sigma: float) -> np.ndarray:
        """``counts`` plus discrete Gaussian noise of scale ``sigma`` (the simulated estimate's seeded draw overrides it)."""
        return discrete_gaussian(counts, sigma=sigma)

    def noisy_counts(self, vote_counts: np.ndarray) -> np.ndarray:
        """The noisy consensus check on every query, then GNMax answers for those that pass.

        Returns
        -------
        numpy.ndarray of int64, shape (n_queries, n_classes)
            GNMax's noisy counts on the answered queries; every count :data:`WITHHELD` on the others.
        """
        counts = validate_vote_counts(vote_counts)
        largest = counts.max(axis=1, initial=0)[:, None]
        passed = self.draw(largest, sigma=self.sigma_threshold)[:, 0] >= self.threshold
        answers = self.draw(counts, sigma=self.sigma)
        return np.where(passed[:, None], answers, WITHHELD)

    @staticmethod
    def answered(noisy_counts: np.ndarray) -> np.ndarray:
        """Which queries of :meth:`noisy_counts`'s output passed the check (bool, shape (n_queries,))."""
        noisy = np.asarray(noisy_counts)
        return ~np.all(noisy == WITHHELD, axis=1) if noisy.shape[1] else np.zeros(len(noisy), bool)

    @property
    def parameters(self) -> dict:
        """The noise parameters, labelled: σ₂ as ``sigma``, T as ``threshold``, σ₁ as ``sigma_threshold``."""
        return {
            "gamma": None,
            "sigma": float(self.sigma),
            "threshold": float(self.threshold),
            "sigma_threshold": float(self.sigma_threshold),
        }

    def check_rdp(self, orders, *, vote_shift: int) -> np.ndarray:
        """RDP α·Δ²/(2σ₁²) of one consensus check (the largest count moves by at most Δ = ``vote_shift``)."""
        return rdp.gaussian_rdp(orders, sigma=self.sigma_threshold, shift=vote_shift)

    def answer_rdp(self, orders, *, vote_shift: int) -> np.ndarray:
        """RDP α·Δ²/σ₂² of one GNMax answer (:meth:`GaussianNoise.query_rdp`)."""
        return GaussianNoise(sigma=self.sigma).query_rdp(orders, vote_shift=vote_shift)

    def query_rdp(self, orders, *, vote_shift: int) -> np.ndarray:
        """Data-independent RDP of one candidate query: its check plus its answer, charged whether or not it is
        answered (which candidates are answered depends on the data)."""
        return self.check_rdp(orders, vote_shift=vote_shift) + self.answer_rdp(
            orders, vote_shift=vote_shift
        )
