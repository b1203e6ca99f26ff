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
        counts = validate_vote_counts(vote_counts)
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
        return _sample(dp.m.make_gaussian(*space, scale=float(self.sigma)), counts)

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
