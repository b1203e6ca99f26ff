"""Example-level privacy of DP-SGD: the Rényi curve of the sampled Gaussian mechanism, never below the truth.

DP-SGD (Abadi et al. 2016, *Deep Learning with Differential Privacy*, Algorithm 1): every step
samples each training example independently with probability q (Poisson sampling), clips each
per-example gradient to L2 norm C (``max_grad_norm``) and adds Gaussian noise of standard
deviation σ·C (σ is the ``noise_multiplier``). The sampled Gaussian mechanism's Rényi curve
(Mironov, Talwar, Zhang 2019, *Rényi Differential Privacy of the Sampled Gaussian Mechanism*)
composes over the steps.

Accountant: the Rényi curve of the sampled Gaussian mechanism as Opacus' and dp-accounting's RDP
accountants define it, computed here without their cancellation (:func:`dp_sgd_rdp`: exact at integer
orders, a convex upper bound between them), on the market's order grid
:data:`~workers.privacy.rdp.RENYI_ORDERS`, and converted to (ε, δ) by the market's one conversion
(:func:`~workers.privacy.rdp.epsilon_from_rdp`, Balle et al. 2020, Thm. 21, as both libraries do).
Opacus' series for fractional orders loses every digit once σ passes about 10 and returns negative
curves, hence negative ε (dp-accounting's sums absolute values there: positive but looser);
this curve is never below the truth and ε is never negative
(``tests/workers/privacy/test_dp_sgd.py`` checks both against the two libraries and against direct
quadrature across the declarable range). The silo toolkit trains with ``PrivacyEngine(accountant="rdp")``
and declares this function's number; the market recomputes it from the declared parameters.

The sample rate and step count follow from what a silo declares exactly as Opacus derives them
from a ``DataLoader`` of ``n_examples`` rows and ``batch_size``: q = 1/⌈n/B⌉ and
⌈n/B⌉ steps per epoch.

The accounting is numpy and scipy only (no torch): about 30 ms for any declarable σ, q and step count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from workers.privacy.rdp import RENYI_ORDERS, epsilon_from_rdp, validate_delta
from workers.privacy.reports import DP_SGD_MECHANISM, EXAMPLE_LEVEL, PrivacyReport

MECHANISM = DP_SGD_MECHANISM
ACCOUNTANT = "rdp"
#: Keys of a DP-SGD declaration's ``privacy_parameters``.
PARAMETER_NAMES = (
    "mechanism",
    "accountant",
    "noise_multiplier",
    "max_grad_norm",
    "batch_size",
    "epochs",
    "delta",
)
MAX_EPOCHS = 10_000
#: The noise multipliers a declaration may give. Below 0.1 a run spends an ε no budget holds; above 1,000 a run
#: learns nothing (and the FAug discriminator's σ has the same ceiling).
MIN_NOISE_MULTIPLIER = 0.1
MAX_NOISE_MULTIPLIER = 1_000.0
#: Relative amount by which a Rényi curve is raised so that rounding never brings it below the truth.
_ROUNDING_MARGIN = 1e-9


@dataclass(frozen=True)
class DpSgdParameters:
    """What a silo declares about its DP-SGD training.

    Attributes
    ----------
    noise_multiplier : float
        σ: noise standard deviation in units of the clipping norm.
    max_grad_norm : float
        C: per-example gradient clipping norm (does not enter ε; recorded).
    batch_size : int
        Expected Poisson batch size B.
    epochs : int
        Passes over the data.
    n_examples : int
        Training examples n (the submission's ``n_local_examples``).
    delta : float
        δ of the declared (ε, δ).
    """

    noise_multiplier: float
    max_grad_norm: float
    batch_size: int
    epochs: int
    n_examples: int
    delta: float

    def __post_init__(self):
        for name in ("noise_multiplier", "max_grad_norm"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(f"'{name}' must be a positive number, not {value!r}.")
        if not MIN_NOISE_MULTIPLIER <= self.noise_multiplier <= MAX_NOISE_MULTIPLIER:
            raise ValueError(
                f"'noise_multiplier' must lie between {MIN_NOISE_MULTIPLIER:g} and {MAX_NOISE_MULTIPLIER:g}, "
                f"not {self.noise_multiplier!r}."
            )
        for name, maximum in (
            ("batch_size", 2**31 - 1),
            ("epochs", MAX_EPOCHS),
            ("n_examples", 2**31 - 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
                raise ValueError(
                    f"'{name}' must be an integer between 1 and {maximum}, not {value!r}."
                )
        validate_delta(self.delta)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.n_examples / self.batch_size)

    @property
    def sample_rate(self) -> float:
        """q = 1/⌈n/B⌉, as Opacus' ``DPDataLoader`` sets it."""
        return 1.0 / self.steps_per_epoch

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    def as_declaration(self) -> dict:
        """The ``privacy_parameters`` a submission carries (``n_examples`` travels as ``n_local_examples``)."""
        return {
            "mechanism": MECHANISM,
            "accountant": ACCOUNTANT,
            "noise_multiplier": float(self.noise_multiplier),
            "max_grad_norm": float(self.max_grad_norm),
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "delta": float(self.delta),
        }

    @classmethod
    def from_declaration(cls, privacy_parameters: dict, *, n_examples: int) -> DpSgdParameters:
        """The inverse of :meth:`as_declaration`; ValueError naming what is missing or wrong."""
        missing = [name for name in PARAMETER_NAMES if name not in privacy_parameters]
        unknown = sorted(set(privacy_parameters) - set(PARAMETER_NAMES))
        if missing or unknown:
            raise ValueError(
                f"DP-SGD privacy parameters are exactly {', '.join(PARAMETER_NAMES)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(unknown)}" if unknown else "")
                + "."
            )
        if privacy_parameters["accountant"] != ACCOUNTANT:
            raise ValueError(
                f"The market accounts DP-SGD with Opacus' '{ACCOUNTANT}' accountant; declare "
                f'"accountant": "{ACCOUNTANT}", not {privacy_parameters["accountant"]!r}.'
            )
        return cls(
            noise_multiplier=privacy_parameters["noise_multiplier"],
            max_grad_norm=privacy_parameters["max_grad_norm"],
            batch_size=privacy_parameters["batch_size"],
            epochs=privacy_parameters["epochs"],
            n_examples=n_examples,
            delta=privacy_parameters["delta"],
        )


def dp_sgd_rdp(*, noise_multiplier: float, sample_rate: float, steps: int) -> np.ndarray:
    """The composed Rényi curve of ``steps`` sampled-Gaussian steps at :data:`RENYI_ORDERS`: never below the truth.

    One step's D_α = log A_α / (α − 1) with A_α = E_{z∼N(0,σ²)}[((1−q) + q·e^{(2z−1)/(2σ²)})^α]
    (Mironov, Talwar, Zhang 2019, Sec. 3.3; what Opacus and dp-accounting compute).

    * Integer orders k: A_k − 1 = Σ_{i=2}^{k} C(k,i) q^i (1−q)^{k−i} (e^{(i²−i)/(2σ²)} − 1), a sum of
      positive terms taken in log space: no cancellation at any σ, so the tiny curves of large σ keep their
      digits (Opacus' fractional-order series cancels there and returns negative curves, hence negative ε).
    * Fractional orders α between the integers k < α < k + 1 take the chord of log A between k and k + 1: log A_α
      is convex in α (a log moment generating function) and log A_1 = 0, so the chord lies above it. Exact at the
      integers, a little above the truth in between.
    * q = 1 (one step is the whole data set): the Gaussian's α/(2σ²), exact at every order.

    The curve is raised by a relative 1e-9 so that floating-point rounding never lowers it below the truth.

    Parameters
    ----------
    noise_multiplier : float
        σ (noise std / clipping norm), within [:data:`MIN_NOISE_MULTIPLIER`, :data:`MAX_NOISE_MULTIPLIER`].
    sample_rate : float
        Poisson sampling probability q in (0, 1].
    steps : int
        Noisy gradient steps composed.

    Returns
    -------
    numpy.ndarray of float, shape (len(RENYI_ORDERS),)
        D_α in nats, finite and non-negative.
    """
    sigma = float(noise_multiplier)
    if not MIN_NOISE_MULTIPLIER <= sigma <= MAX_NOISE_MULTIPLIER:
        raise ValueError(
            f"The noise multiplier must lie in [{MIN_NOISE_MULTIPLIER:g}, {MAX_NOISE_MULTIPLIER:g}], not {sigma!r}."
        )
    if not 0 < sample_rate <= 1:
        raise ValueError(f"The sample rate must lie in (0, 1], not {sample_rate!r}.")
    if sample_rate == 1:
        per_step = RENYI_ORDERS / (2 * sigma**2)
    else:
        lower = np.floor(RENYI_ORDERS).astype(int)
        upper = np.ceil(RENYI_ORDERS).astype(int)
        integers = np.unique(np.concatenate([lower, upper]))
        log_a = dict(
            zip(integers.tolist(), _log_a_integer(integers, q=float(sample_rate), sigma=sigma))
        )
        log_a_lower = np.array([log_a[k] for k in lower.tolist()])
        log_a_upper = np.array([log_a[k] for k in upper.tolist()])
        weight = RENYI_ORDERS - lower  # 0 at the integers
        per_step = ((1 - weight) * log_a_lower + weight * log_a_upper) / (RENYI_ORDERS - 1)
    return steps * per_step * (1 + _ROUNDING_MARGIN)


def _log_a_integer(orders, *, q: float, sigma: float) -> np.ndarray:
    """log A_k of the sampled Gaussian at integer orders k ≥ 1, 0 < q < 1 (log A_1 = 0)."""
    log_a = np.zeros(len(orders))
    for position, order in enumerate(orders):
        if order < 2:
            continue
        i = np.arange(2, order + 1, dtype=float)
        # (i² − i)/(2σ²) ≥ 1/σ² ≥ 1e-6 for σ ≤ MAX_NOISE_MULTIPLIER: never rounded to 0
        exponent = (i * i - i) / (2 * sigma**2)
        log_expm1 = np.where(
            exponent > 30,
            exponent + np.log1p(-np.exp(-np.maximum(exponent, 30))),
            np.log(np.expm1(np.minimum(exponent, 30))),
        )
        terms = (
            gammaln(order + 1)
            - gammaln(i + 1)
            - gammaln(order - i + 1)
            + i * math.log(q)
            + (order - i) * math.log1p(-q)
            + log_expm1
        )
        log_a[position] = np.logaddexp(0.0, logsumexp(terms))  # log(1 + (A_k − 1))
    return log_a


def dp_sgd_privacy_bound(parameters: DpSgdParameters) -> tuple[PrivacyReport, np.ndarray]:
    """The example-level (ε, δ) of a DP-SGD run and its Rényi curve.

    Returns
    -------
    (PrivacyReport, numpy.ndarray)
        The report (``mechanism`` "dp_sgd", ``sigma`` the noise multiplier, ``n_queries`` the steps,
        ``sample_rate`` q, ``accountant`` "rdp") and the curve at :data:`RENYI_ORDERS`.
    """
    curve = dp_sgd_rdp(
        noise_multiplier=parameters.noise_multiplier,
        sample_rate=parameters.sample_rate,
        steps=parameters.steps,
    )
    epsilon, order = epsilon_from_rdp(RENYI_ORDERS, curve, delta=parameters.delta)
    report = PrivacyReport(
        epsilon=float(epsilon),
        delta=float(parameters.delta),
        unit=EXAMPLE_LEVEL,
        mechanism=MECHANISM,
        gamma=None,
        sigma=float(parameters.noise_multiplier),
        n_queries=parameters.steps,
        partitions=1,
        teachers=1,
        data_dependent=False,
        order=float(order),
        vote_shift=None,
        sample_rate=parameters.sample_rate,
        accountant=ACCOUNTANT,
        max_grad_norm=float(parameters.max_grad_norm),
    )
    return report, curve


def noise_multiplier_for(
    *, target_epsilon: float, batch_size: int, epochs: int, n_examples: int, delta: float
) -> float:
    """The least σ (to a relative 1e-4, rounded towards more noise) whose DP-SGD run spends at most
    ``target_epsilon``: bisection on log σ through :func:`dp_sgd_privacy_bound` (ε falls as σ grows).
    :data:`MIN_NOISE_MULTIPLIER` when even that spends less; ValueError when not even
    :data:`MAX_NOISE_MULTIPLIER` does."""
    if not (
        isinstance(target_epsilon, (int, float))
        and math.isfinite(target_epsilon)
        and target_epsilon > 0
    ):
        raise ValueError(f"The target ε must be a positive number, not {target_epsilon!r}.")

    def epsilon(noise_multiplier: float) -> float:
        parameters = DpSgdParameters(
            noise_multiplier=noise_multiplier,
            max_grad_norm=1.0,
            batch_size=batch_size,
            epochs=epochs,
            n_examples=n_examples,
            delta=delta,
        )
        return dp_sgd_privacy_bound(parameters)[0].epsilon

    if epsilon(MIN_NOISE_MULTIPLIER) <= target_epsilon:
        return MIN_NOISE_MULTIPLIER
    if epsilon(MAX_NOISE_MULTIPLIER) > target_epsilon:
        raise ValueError(
            f"No noise multiplier up to {MAX_NOISE_MULTIPLIER:g} spends as little as ε = {target_epsilon:g} "
            "in this many steps; allow a larger ε or train fewer epochs."
        )
    too_little, enough = math.log(MIN_NOISE_MULTIPLIER), math.log(MAX_NOISE_MULTIPLIER)
    while enough - too_little > 1e-4:
        middle = (too_little + enough) / 2
        too_little, enough = (
            (too_little, middle)
            if epsilon(math.exp(middle)) <= target_epsilon
            else (middle, enough)
        )
    return math.exp(enough)


__all__ = [
    "ACCOUNTANT",
    "MAX_NOISE_MULTIPLIER",
    "MECHANISM",
    "MIN_NOISE_MULTIPLIER",
    "PARAMETER_NAMES",
    "DpSgdParameters",
    "dp_sgd_privacy_bound",
    "dp_sgd_rdp",
    "noise_multiplier_for",
]
