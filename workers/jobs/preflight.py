"""A pre-flight estimate of a private job: what its model would score, simulated before anything is spent.

An L1 estimate never reads the silos' votes (issue 38 item 3): an operator who asked several estimates and launched
the best would otherwise choose on un-noised private scores that no ε covers (Papernot & Steinke 2022). It fuses
*simulated* votes instead — each member voting as a model fitted on the operator's own evaluation rows (the fit
half, never the report half) — with simulated draws of the job's server noise, and scores each fused model on the
evaluation split: it says what the job's noise and query count leave of a model whose voters are about as good as
the operator's rows, never how good the silos are. Nothing is stored or published and no budget is charged. (At L2
the members already carry the silos' own noise: an estimate fuses them, which is post-processing.)

Simulated noise has the distribution of the job's mechanism (:mod:`workers.privacy.mechanisms`) but is drawn from a
seeded numpy generator, so an estimate can be repeated exactly. It must never stand in for real DP noise: the
real mechanisms draw from OpenDP's cryptographically secure samplers and are never seeded (DESIGN.md, "Privacy
semantics"). The simulated classes subclass the real ones, so the engine and its accountant treat them alike.

- :func:`simulated_noise`: the job's mechanism with a seeded draw.
- :func:`draw_seeds`: independent seeds of the simulated draws, from the estimate's seed.
- :func:`metric_spread`: mean, standard deviation and range of each headline metric over the draws.
- :func:`simulated_member_predictions`: the members' votes an L1 estimate fuses instead of the silos' own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.privacy.mechanisms import (
    ConfidentGaussianNoise,
    GaussianNoise,
    LaplaceNoise,
    validate_vote_counts,
)

#: Discrete Gaussian draws are taken from its pmf on ``|k| ≤ GAUSSIAN_TAIL_SIGMAS · σ + 1``; the mass left out,
#: about exp(−GAUSSIAN_TAIL_SIGMAS² / 2), is below 1e-40.
GAUSSIAN_TAIL_SIGMAS = 14
#: The headline metrics an estimate reports (accuracy and balanced accuracy, 0..1).
ESTIMATED_METRICS = ("accuracy", "balanced_accuracy")


def _generator(mechanism) -> np.random.Generator:
    """The mechanism's own generator, seeded on its first draw: a fusion that draws twice (a noisy check, then the
    noisy answer) gets two independent draws, and the same sequence again from the same seed."""
    if "_generator" not in mechanism.__dict__:
        # a frozen dataclass: the generator is state of the draws, not a field (it is not compared or copied)
        object.__setattr__(mechanism, "_generator", np.random.default_rng(mechanism.seed))
    return mechanism.__dict__["_generator"]


@dataclass(frozen=True)
class SimulatedLaplaceNoise(LaplaceNoise):
    """:class:`LaplaceNoise` (pmf ∝ exp(−γ|k|)) drawn from ``numpy.random.default_rng(seed)``: for estimates only.

    A discrete Laplace variable is the difference of two independent geometric variables on {0, 1, …} with
    success probability 1 − e^{−γ} (Inusah & Kozubowski 2006, *A discrete analogue of the Laplace distribution*).
    """

    seed: int = 0

    def noisy_counts(self, vote_counts: np.ndarray) -> np.ndarray:
        """``vote_counts`` ``(n_queries, n_classes)`` plus seeded discrete Laplace noise of scale 1/γ (int64)."""
        counts = validate_vote_counts(vote_counts)
        rng = _generator(self)
        success = -math.expm1(-self.gamma)  # 1 − e^{−γ}, exact for small γ
        # numpy's geometric counts trials up to the first success (≥ 1); minus one counts failures
        noise = rng.geometric(success, size=counts.shape) - rng.geometric(
            success, size=counts.shape
        )
        return counts + noise.astype(np.int64)


@dataclass(frozen=True)
class SimulatedGaussianNoise(GaussianNoise):
    """:class:`GaussianNoise` (pmf ∝ exp(−k²/2σ²) on the integers) drawn from ``numpy.random.default_rng(seed)``:
    for estimates only. Drawn from the pmf on ``|k| ≤`` :data:`GAUSSIAN_TAIL_SIGMAS` ``· σ + 1``."""

    seed: int = 0

    def noisy_counts(self, vote_counts: np.ndarray) -> np.ndarray:
        """``vote_counts`` ``(n_queries, n_classes)`` plus seeded discrete Gaussian noise of scale σ (int64)."""
        return _seeded_discrete_gaussian(
            validate_vote_counts(vote_counts), sigma=self.sigma, rng=_generator(self)
        )


def _seeded_discrete_gaussian(
    counts: np.ndarray, *, sigma: float, rng: np.random.Generator
) -> np.ndarray:
    """``counts`` plus discrete Gaussian noise of scale σ from ``rng``, drawn from the pmf on
    ``|k| ≤`` :data:`GAUSSIAN_TAIL_SIGMAS` ``· σ + 1``."""
    reach = int(math.ceil(GAUSSIAN_TAIL_SIGMAS * sigma)) + 1
    support = np.arange(-reach, reach + 1)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma**2))
    noise = rng.choice(support, size=counts.shape, p=weights / weights.sum())
    return counts + noise.astype(np.int64)


@dataclass(frozen=True)
class SimulatedConfidentGaussianNoise(ConfidentGaussianNoise):
    """:class:`ConfidentGaussianNoise` whose check and answers are drawn from ``numpy.random.default_rng(seed)``:
    for estimates only."""

    seed: int = 0

    def draw(self, counts: np.ndarray, *, sigma: float) -> np.ndarray:
        return _seeded_discrete_gaussian(counts, sigma=sigma, rng=_generator(self))


def simulated_noise(
    mechanism: LaplaceNoise | GaussianNoise | ConfidentGaussianNoise, *, seed: int
) -> SimulatedLaplaceNoise | SimulatedGaussianNoise | SimulatedConfidentGaussianNoise:
    """``mechanism``'s noise, drawn from a generator seeded with ``seed`` (a ValueError for a mechanism that has
    no simulation here: an estimate must not fall back to spending real noise)."""
    if isinstance(mechanism, LaplaceNoise):
        return SimulatedLaplaceNoise(gamma=mechanism.gamma, seed=seed)
    if isinstance(mechanism, GaussianNoise):
        return SimulatedGaussianNoise(sigma=mechanism.sigma, seed=seed)
    if isinstance(mechanism, ConfidentGaussianNoise):
        return SimulatedConfidentGaussianNoise(
            sigma=mechanism.sigma,
            threshold=mechanism.threshold,
            sigma_threshold=mechanism.sigma_threshold,
            seed=seed,
        )
    raise ValueError(
        f"No simulation of the {type(mechanism).__name__} mechanism exists for a pre-flight estimate."
    )


def draw_seeds(seed: int, count: int) -> list[int]:
    """``count`` independent seeds of simulated draws derived from ``seed`` (stable across runs and machines)."""
    return [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(count)]


def metric_spread(draws: Sequence[dict]) -> dict:
    """Per metric of :data:`ESTIMATED_METRICS`, over the draws' metrics (each a mapping with those keys, 0..1):
    ``{"mean", "sd", "min", "max"}``; ``sd`` is the sample standard deviation (0 for a single draw)."""
    spread = {}
    for name in ESTIMATED_METRICS:
        values = np.asarray([draw[name] for draw in draws], dtype=np.float64)
        spread[name] = {
            "mean": float(values.mean()),
            "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "min": float(values.min()),
            "max": float(values.max()),
        }
    return spread


def simulated_member_predictions(
    probabilities: np.ndarray, *, n_models: Sequence[int], seed: int
) -> list[np.ndarray]:
    """What an L1 estimate fuses instead of the silos' votes (issue 38 item 3): for each member, one class per row
    drawn from ``probabilities`` ``(n_rows, K)`` (a model fitted on the operator's own rows), given by all of that
    member's ``n_models[i]`` models alike (a silo's students agree with each other more than with another silo's).
    Each member's predictions are one-hot ``(n_models[i], n_rows, K)``, as a job's sandbox would return them."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    cumulative = np.cumsum(probabilities / probabilities.sum(axis=1, keepdims=True), axis=1)
    cumulative[:, -1] = 1.0
    rng = np.random.default_rng(seed)
    identity = np.eye(probabilities.shape[1])
    predictions = []
    for count in n_models:
        classes = (rng.random(len(probabilities))[:, None] < cumulative).argmax(axis=1)
        predictions.append(np.repeat(identity[classes][None], count, axis=0))
    return predictions
