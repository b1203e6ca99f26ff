"""Example-level privacy of DP-SGD, computed with Opacus' RDP accountant.

DP-SGD (Abadi et al. 2016, *Deep Learning with Differential Privacy*, Algorithm 1): every step
samples each training example independently with probability q (Poisson sampling), clips each
per-example gradient to L2 norm C (``max_grad_norm``) and adds Gaussian noise of standard
deviation σ·C (σ is the ``noise_multiplier``). The sampled Gaussian mechanism's Rényi curve
(Mironov, Talwar, Zhang 2019, *Rényi Differential Privacy of the Sampled Gaussian Mechanism*)
composes over the steps.

Accountant: Opacus' **RDP** accountant — its ``compute_rdp`` for the curve and its
``get_privacy_spent`` (Balle et al. 2020, Thm. 21) for the conversion — evaluated on the market's
order grid :data:`~workers.privacy.rdp.RENYI_ORDERS` rather than Opacus' default 150 orders, so
that the curve composes with the budget's other costs and ε is never floored by a short grid. The
silo toolkit trains with ``PrivacyEngine(accountant="rdp")`` and declares this same number; the
market recomputes it from the declared parameters. (Opacus' default PRV accountant gives a
slightly smaller ε but no Rényi curve to compose.)

The sample rate and step count follow from what a silo declares exactly as Opacus derives them
from a ``DataLoader`` of ``n_examples`` rows and ``batch_size``: q = 1/⌈n/B⌉ and
⌈n/B⌉ steps per epoch.

Opacus imports torch (about 2 s), so it is imported inside the functions that need it: a web
process that never meets a DP-SGD declaration never loads it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from workers.privacy.rdp import RENYI_ORDERS, validate_delta
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
    """The composed Rényi curve of ``steps`` sampled-Gaussian steps at :data:`RENYI_ORDERS`.

    Parameters
    ----------
    noise_multiplier : float
        σ (noise std / clipping norm).
    sample_rate : float
        Poisson sampling probability q in (0, 1].
    steps : int
        Noisy gradient steps composed.

    Returns
    -------
    numpy.ndarray of float, shape (len(RENYI_ORDERS),)
        D_α in nats (Opacus' ``compute_rdp``).
    """
    from opacus.accountants.analysis.rdp import (
        compute_rdp,  # imports torch: only where DP-SGD is accounted
    )

    if not 0 < sample_rate <= 1:
        raise ValueError(f"The sample rate must lie in (0, 1], not {sample_rate!r}.")
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        curve = np.asarray(
            compute_rdp(
                q=float(sample_rate),
                noise_multiplier=float(noise_multiplier),
                steps=int(steps),
                orders=RENYI_ORDERS,
            ),
            dtype=float,
        )
    # Opacus' series overflows to NaN at large fractional orders (α above ~1000). There the curve takes the
    # unsampled Gaussian's α/(2σ²) per step: an upper bound (sampling never increases the Rényi divergence)
    # that keeps the curve finite for the ledger and never attains the minimum ε.
    unsampled = steps * RENYI_ORDERS / (2 * float(noise_multiplier) ** 2)
    return np.where(np.isfinite(curve), curve, unsampled)


def dp_sgd_privacy_bound(parameters: DpSgdParameters) -> tuple[PrivacyReport, np.ndarray]:
    """The example-level (ε, δ) of a DP-SGD run and its Rényi curve.

    Returns
    -------
    (PrivacyReport, numpy.ndarray)
        The report (``mechanism`` "dp_sgd", ``sigma`` the noise multiplier, ``n_queries`` the steps,
        ``sample_rate`` q, ``accountant`` "rdp") and the curve at :data:`RENYI_ORDERS`.
    """
    from opacus.accountants.analysis.rdp import (
        get_privacy_spent,  # imports torch, as above
    )

    curve = dp_sgd_rdp(
        noise_multiplier=parameters.noise_multiplier,
        sample_rate=parameters.sample_rate,
        steps=parameters.steps,
    )
    epsilon, order = get_privacy_spent(orders=RENYI_ORDERS, rdp=curve, delta=parameters.delta)
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
    """A σ whose DP-SGD run spends at most ``target_epsilon`` (and within about 1 % of it): Opacus'
    ``get_noise_multiplier`` with the RDP accountant (on Opacus' default orders), then raised in 0.2 % steps
    until the market's grid also gives at most the target."""
    from opacus.accountants.utils import get_noise_multiplier  # imports torch, as above

    probe = DpSgdParameters(
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=batch_size,
        epochs=epochs,
        n_examples=n_examples,
        delta=delta,
    )
    if not (
        isinstance(target_epsilon, (int, float))
        and math.isfinite(target_epsilon)
        and target_epsilon > 0
    ):
        raise ValueError(f"The target ε must be a positive number, not {target_epsilon!r}.")
    noise_multiplier = float(
        get_noise_multiplier(
            target_epsilon=float(target_epsilon),
            target_delta=float(delta),
            sample_rate=probe.sample_rate,
            steps=probe.steps,
            accountant=ACCOUNTANT,
        )
    )
    while _epsilon(probe, noise_multiplier) > target_epsilon:
        noise_multiplier *= 1.002
    return noise_multiplier


def _epsilon(parameters: DpSgdParameters, noise_multiplier: float) -> float:
    from opacus.accountants.analysis.rdp import get_privacy_spent  # imports torch, as above

    curve = dp_sgd_rdp(
        noise_multiplier=noise_multiplier,
        sample_rate=parameters.sample_rate,
        steps=parameters.steps,
    )
    return float(get_privacy_spent(orders=RENYI_ORDERS, rdp=curve, delta=parameters.delta)[0])


__all__ = [
    "ACCOUNTANT",
    "MECHANISM",
    "PARAMETER_NAMES",
    "DpSgdParameters",
    "dp_sgd_privacy_bound",
    "dp_sgd_rdp",
    "noise_multiplier_for",
]
