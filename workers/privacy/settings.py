"""An L1 job's server noise: one type, :class:`PrivacySettings`, resolved once from what the job asked for.

A job that adds server noise (L1, party-level DP) stores its noise as ``parameters["privacy"]``:
``{"mechanism", "gamma", "sigma", "delta", "n_queries"}`` and, for Confident-GNMax only, ``"threshold"`` and
``"sigma_threshold"``. That JSON shape is the contract between the job, its price (the budgets reserve and charge
from it), its run (the runner draws the noise it names) and its pre-flight estimate; a data-independent report of
the noise a job used carries the same keys. :meth:`PrivacySettings.resolved` is the one place that checks what a
request gives and fills in the defaults; :meth:`PrivacySettings.of` reads the stored shape back, and
:meth:`PrivacySettings.noise` builds the mechanism that adds it (:mod:`workers.privacy.mechanisms`).

The mechanisms (Papernot et al. 2018, *Scalable Private Learning with PATE*, section 4.1 for GNMax and
Confident-GNMax; FedKT, Li, He, Song, section 4.2 for the Laplace noise of its votes):

- ``laplace``: discrete Laplace noise of scale 1/γ on every vote count (γ: the smaller, the more noise);
- ``gaussian``: GNMax, Gaussian noise of standard deviation σ (votes) on every count;
- ``confident_gnmax``: a query is answered (with GNMax of σ, the answers' σ₂) only where its largest count plus
  Gaussian noise of σ₁ (``sigma_threshold``) reaches the threshold T (``threshold``), both in votes.

The protected unit (``"unit"``, issue 40): ``party`` (the default: neighbours differ in one silo's whole data, FedKT's
consistent votes) or ``record`` (neighbours differ in one record of one silo: GNMax over every student of every silo,
each student fitted on a disjoint partition of its silo's rows; :func:`workers.privacy.accounting.
server_noise_privacy_bound`). It is stored only when it is ``record``, so that a party-level job keeps the JSON shape
it always had; a report of the noise carries its unit as ``party-level`` or ``example-level``, which :meth:`of` reads
back.

Pure core: no Django, no market.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from workers.privacy.mechanisms import ConfidentGaussianNoise, GaussianNoise, LaplaceNoise
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL

#: The L1 mechanisms by name: discrete Laplace, GNMax and Confident-GNMax (:mod:`workers.privacy.mechanisms`).
L1_MECHANISMS = ("laplace", "gaussian", "confident_gnmax")
#: The units an L1 job may protect: one silo's whole data (FedKT's consistent votes) or one record (GNMax over every
#: student of every silo, each fitted on a disjoint partition of its silo's rows). The first is the default.
PRIVACY_UNITS = ("party", "record")
#: The label of each unit in a :class:`~workers.privacy.reports.PrivacyReport` (and so on every ledger line and card).
UNIT_LABELS = {"party": PARTY_LEVEL, "record": EXAMPLE_LEVEL}
#: Confident-GNMax's own parameters, beside its answers' σ: the threshold T and the check's σ₁ (votes).
CONFIDENT_KEYS = ("threshold", "sigma_threshold")
#: γ of a Laplace job that names none, and its federation neither (FedKT's experiments use 0.04).
DEFAULT_GAMMA = 0.04
#: Confident-GNMax's threshold T and check noise σ₁ of a job that names none, as shares of the most votes a query can
#: hold (chosen on Adult's validation rows by ``python -m workers.reproduce.confident choose``,
#: docs/results/private.md).
DEFAULT_CONFIDENT_THRESHOLD_RATIO, DEFAULT_CONFIDENT_CHECK_NOISE_RATIO = 0.5, 0.6
#: σ of a GNMax job that names none, as a share of the most votes a query can hold (issue 25; chosen on Adult's
#: validation rows with the L1 default final model by ``python -m workers.reproduce.private choose-final``,
#: docs/results/private.md).
DEFAULT_GNMAX_NOISE_RATIO = 0.35

#: What a job's ``privacy`` may say; the launcher shows it once for every kind that adds server noise.
PRIVACY_HELP = (
    'L1 only: {"mechanism": "gaussian" with "sigma" (the default, GNMax) | "laplace" with "gamma" | '
    '"confident_gnmax" with "sigma", "threshold" and "sigma_threshold", "delta", "unit": "party" (the default) | '
    '"record"}; a Gaussian or Confident-GNMax '
    "job that names no sigma gets the σ and queries that fit its members' budgets."
)
#: One sentence per key of ``privacy`` that the launcher shows as its own input.
PRIVACY_KEY_HELP = {
    "mechanism": "L1 noise: gaussian (GNMax, the default) | laplace | confident_gnmax (Confident-GNMax: only the "
    "queries whose noisy largest vote count reaches the threshold are answered, with GNMax; every candidate "
    "query is charged its check and its answer).",
    "unit": "What the L1 noise protects: party (the default: one silo's whole data, FedKT's consistent votes) | "
    "record (one record of one silo, example-level: every student of every silo votes, each fitted on a disjoint "
    "partition of its silo's rows as its submission declares; the federation must accept the unit).",
    "threshold": "confident_gnmax only: T, in votes, that a query's largest vote count plus noise must reach to be "
    f"answered (default {DEFAULT_CONFIDENT_THRESHOLD_RATIO} × the most votes a query can hold).",
    "sigma_threshold": "confident_gnmax only: σ₁, in votes, the noise of the consensus check (default "
    f"{DEFAULT_CONFIDENT_CHECK_NOISE_RATIO} × the most votes a query can hold).",
}
#: The keys a request may give in ``privacy`` (``n_queries`` is derived from the job's query, never given).
GIVEN_KEYS = ("mechanism", "gamma", "sigma", "delta", "unit", *CONFIDENT_KEYS)
_STORED_REQUIRED = ("mechanism", "delta", "n_queries")


def noise_mechanism(
    *,
    mechanism: str,
    gamma: float | None,
    sigma: float | None,
    threshold: float | None = None,
    sigma_threshold: float | None = None,
):
    """The noise object for a mechanism name and its noise parameters; a ValueError naming what does not fit
    the mechanism (each takes its own noise parameter and no other)."""
    confident = {"threshold": threshold, "sigma_threshold": sigma_threshold}
    if mechanism != "confident_gnmax" and any(value is not None for value in confident.values()):
        raise ValueError("Only Confident-GNMax takes 'threshold' and 'sigma_threshold'.")
    if mechanism == "laplace":
        if gamma is None or sigma is not None:
            raise ValueError("Laplace noise takes 'gamma' (and no 'sigma').")
        return LaplaceNoise(gamma=gamma)
    if mechanism in ("gaussian", "confident_gnmax"):
        if sigma is None or gamma is not None:
            raise ValueError("Gaussian noise takes 'sigma' (and no 'gamma').")
        if mechanism == "gaussian":
            return GaussianNoise(sigma=sigma)
        if threshold is None or sigma_threshold is None:
            missing = [name for name, value in confident.items() if value is None]
            raise ValueError(f"Confident-GNMax also takes {' and '.join(map(repr, missing))}.")
        return ConfidentGaussianNoise(
            sigma=sigma, threshold=threshold, sigma_threshold=sigma_threshold
        )
    raise ValueError(f"The mechanism must be one of {', '.join(L1_MECHANISMS)}, got {mechanism!r}.")


def _positive(value) -> bool:
    """A finite number above 0 (not a boolean, not text): what every noise parameter and δ must be."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        return bool(math.isfinite(value) and value > 0)
    except OverflowError:  # an integer beyond 1e308
        return False


@dataclass(frozen=True)
class PrivacySettings:
    """An L1 job's server noise, resolved (the module docstring's stored shape, field by field).

    Attributes
    ----------
    mechanism : {"laplace", "gaussian", "confident_gnmax"}
    delta : float
        δ of the job's own report (a budget converts the job's Rényi curve at its own δ).
    n_queries : int
        Public rows the server queries: noisy answers released (Confident-GNMax: candidate queries).
    gamma, sigma : float or None
        The noise parameter of the mechanism, the other None: γ for Laplace, σ in votes for the Gaussian ones
        (Confident-GNMax: its answers' σ₂).
    threshold, sigma_threshold : float or None
        Confident-GNMax only: T and σ₁, in votes.
    unit : {"party", "record"}
        What the noise protects (:data:`PRIVACY_UNITS`; the module docstring).
    """

    mechanism: str
    delta: float
    n_queries: int
    gamma: float | None = None
    sigma: float | None = None
    threshold: float | None = None
    sigma_threshold: float | None = None
    unit: str = PRIVACY_UNITS[0]

    def as_dict(self) -> dict:
        """The stored shape (``parameters["privacy"]``): the threshold keys only for Confident-GNMax, so that the
        other mechanisms' JSON keeps the shape it always had."""
        stored = {
            "mechanism": self.mechanism,
            "gamma": self.gamma,
            "sigma": self.sigma,
            "delta": self.delta,
            "n_queries": self.n_queries,
        }
        if self.mechanism == "confident_gnmax":
            stored |= {"threshold": self.threshold, "sigma_threshold": self.sigma_threshold}
        if self.unit != PRIVACY_UNITS[0]:
            stored["unit"] = self.unit
        return stored

    @property
    def unit_label(self) -> str:
        """The report's label of the unit: "party-level" or "example-level"."""
        return UNIT_LABELS[self.unit]

    def given(self) -> dict:
        """What a request would give to get these settings back: the given keys that hold a value
        (``n_queries`` follows from the job's query)."""
        stored = self.as_dict()
        return {key: stored[key] for key in GIVEN_KEYS if stored.get(key) is not None}

    def noise(self):
        """The mechanism that adds this noise (:func:`noise_mechanism`); a ValueError for a mismatched one."""
        return noise_mechanism(
            mechanism=self.mechanism,
            gamma=self.gamma,
            sigma=self.sigma,
            threshold=self.threshold,
            sigma_threshold=self.sigma_threshold,
        )

    @classmethod
    def of(cls, privacy: PrivacySettings | Mapping, **changes) -> PrivacySettings:
        """``privacy`` as settings, with ``changes``: settings as they are, or the stored shape (a job's
        ``parameters["privacy"]`` or a report of the noise it used; other keys are ignored). A ValueError names
        the keys the stored shape lacks (mechanism, delta and n_queries, unless ``changes`` gives them)."""
        if isinstance(privacy, PrivacySettings):
            return replace(privacy, **changes)
        given = {**privacy, **changes}
        missing = [name for name in _STORED_REQUIRED if name not in given]
        if missing:
            raise ValueError(f"The privacy parameters lack {', '.join(missing)}.")
        names = {field.name for field in fields(cls)}
        known = {name: value for name, value in given.items() if name in names}
        if "unit" in known:  # a report says "party-level" or "example-level"
            known["unit"] = privacy_unit({"unit": known["unit"]})
        return cls(**known)

    @classmethod
    def resolved(
        cls,
        given,
        *,
        defaults: Mapping,
        default_delta: float,
        n_queries: int,
        sigma: float | None = None,
        most_votes: int = 1,
    ) -> PrivacySettings:
        """The settings of an L1 job from what its request gives (``given``: its ``privacy`` object or None).

        ``defaults``: the federation's default parameters (its ``gamma`` or ``sigma``); ``default_delta``: its δ;
        ``n_queries``: the rows the job queries; ``sigma``: the calibrated σ of a Gaussian (or Confident-GNMax)
        job whose request and federation name none; ``most_votes``: the most votes a query can hold (sets
        Confident-GNMax's default T and σ₁). A ValueError with a sentence for the person who asked otherwise.
        """
        given = privacy_given(given)
        mechanism = mechanism_named(given, defaults=defaults)
        extra = [name for name in CONFIDENT_KEYS if name in given]
        if extra and mechanism != "confident_gnmax":
            raise ValueError(
                f'\'privacy.{extra[0]}\' applies to "mechanism": "confident_gnmax" only; remove it or choose '
                "that mechanism."
            )
        noise_name = "gamma" if mechanism == "laplace" else "sigma"
        noise = given.get(
            noise_name,
            defaults.get(noise_name, DEFAULT_GAMMA if mechanism == "laplace" else sigma),
        )
        delta = given.get("delta", float(default_delta))
        for name, number in ((noise_name, noise), ("delta", delta)):
            if not _positive(number):
                raise ValueError(
                    f"'privacy.{name}' must be a positive number, not {number!r}. {PRIVACY_HELP}"
                )
        if delta >= 1:
            raise ValueError(f"'privacy.delta' must be below 1, not {delta}.")
        confident = (
            confident_resolved(given, most_votes=most_votes)
            if mechanism == "confident_gnmax"
            else {}
        )
        return cls(
            unit=privacy_unit(given),
            mechanism=mechanism,
            delta=float(delta),
            n_queries=n_queries,
            gamma=float(noise) if mechanism == "laplace" else None,
            sigma=None if mechanism == "laplace" else float(noise),
            **confident,
        )


def privacy_unit(privacy: Mapping | None) -> str:
    """The unit a job's ``privacy`` names ("party" where it names none; a report's "party-level" or
    "example-level" read as "party" or "record"); a ValueError with a sentence for any other value."""
    unit = (privacy or {}).get("unit", PRIVACY_UNITS[0])
    by_label = {label: name for name, label in UNIT_LABELS.items()}
    if isinstance(unit, str) and unit in by_label:
        return by_label[unit]
    if unit not in PRIVACY_UNITS:
        raise ValueError(
            f"'privacy.unit' must be one of {', '.join(map(repr, PRIVACY_UNITS))} (what the noise protects: one "
            f"silo's whole data or one record), not {unit!r}."
        )
    return unit


def privacy_given(value) -> dict:
    """A request's ``privacy`` object as a dict (None: empty); a ValueError for anything but a JSON object."""
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"'privacy' must be a JSON object, not {value!r}. {PRIVACY_HELP}")
    return dict(value or {})


def mechanism_named(given: Mapping, *, defaults: Mapping) -> str:
    """The mechanism a request names, or the one its noise parameter (or else the federation's default one)
    implies: γ means Laplace; otherwise Gaussian (GNMax, the default)."""
    if "mechanism" in given:
        mechanism = given["mechanism"]
    elif "gamma" in given or ("sigma" not in given and "gamma" in defaults):
        mechanism = "laplace"
    else:
        mechanism = "gaussian"
    if mechanism not in L1_MECHANISMS:
        raise ValueError(
            f"The noise mechanism must be one of {', '.join(map(repr, L1_MECHANISMS))}, not {mechanism!r}."
        )
    return mechanism


def names_sigma(given: Mapping, *, defaults: Mapping) -> bool:
    """Whether the request or the federation's defaults name σ (else a Gaussian job's σ is calibrated)."""
    return "sigma" in given or "sigma" in defaults


def confident_resolved(given: Mapping, *, most_votes: int) -> dict:
    """Confident-GNMax's threshold T and check noise σ₁ (votes): as given, else the default shares of the most
    votes a query can hold. A ValueError for a value that is not a positive number, or for a T above those votes
    (no query could reach it but by noise)."""
    resolved = {
        "threshold": given.get("threshold", DEFAULT_CONFIDENT_THRESHOLD_RATIO * most_votes),
        "sigma_threshold": given.get(
            "sigma_threshold", DEFAULT_CONFIDENT_CHECK_NOISE_RATIO * most_votes
        ),
    }
    for name, number in resolved.items():
        if not _positive(number):
            raise ValueError(
                f"'privacy.{name}' must be a positive number of votes, not {number!r}. {PRIVACY_HELP}"
            )
    if resolved["threshold"] > most_votes:
        raise ValueError(
            f"'privacy.threshold' is {resolved['threshold']:g} votes, above the {most_votes} votes a query of this "
            f"job can hold: no query could pass the consensus check but by noise; give at most {most_votes}."
        )
    return {name: float(number) for name, number in resolved.items()}
