"""The labelled results of privacy accounting: every ε says what it means."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass

PARTY_LEVEL = "party-level"
EXAMPLE_LEVEL = "example-level"
#: The ``mechanism`` of a DP-SGD report (workers.privacy.dp_sgd); its extra fields appear only there.
DP_SGD_MECHANISM = "dp_sgd"
_DP_SGD_FIELDS = ("sample_rate", "accountant", "max_grad_norm")
#: The ``mechanism`` of a Confident-GNMax report (workers.privacy.mechanisms.ConfidentGaussianNoise); its
#: threshold fields appear only there.
CONFIDENT_GNMAX_MECHANISM = "confident_gnmax"
_CONFIDENT_FIELDS = ("threshold", "sigma_threshold")


@dataclass(frozen=True)
class PrivacyReport:
    """One (ε, δ) guarantee, labelled with everything needed to read it.

    Attributes
    ----------
    epsilon, delta : float
        The guarantee, ε in nats.
    unit : str
        "party-level" (L1: neighbours differ in one silo) or "example-level" (L2: in one record).
    mechanism : str
        "laplace", "gaussian" or "confident_gnmax" (L1 vote noise), "dp_sgd".
    gamma, sigma : float or None
        The noise parameter of the mechanism (the other is None).
    n_queries : int
        Noisy queries composed (at L2: by one party, over its s partitions).
    partitions, teachers : int
        FedKT's s and t.
    data_dependent : bool
        Whether ε depends on the vote margins (then it is itself private information).
    order : float
        Rényi order α at which ε was attained.
    vote_shift : int or None
        Votes one neighbour moves between two classes per query, the sensitivity the curve was
        computed for: at L1 s × the party's submissions in the job (or s × its largest vote
        weight); 1 at L2. None in reports stored before it was recorded (they used s at L1).
    sample_rate, accountant, max_grad_norm : float, str, float or None
        DP-SGD only (``mechanism`` "dp_sgd", :mod:`workers.privacy.dp_sgd`): the Poisson sampling
        rate q, the accountant ("rdp") and the clipping norm C; ``sigma`` is then the noise
        multiplier and ``n_queries`` the noisy gradient steps. None for vote noise.
    threshold, sigma_threshold : float or None
        Confident-GNMax only (``mechanism`` "confident_gnmax"): the consensus threshold T and the check's noise
        σ₁, in votes; ``sigma`` is then the answers' σ₂ and ``n_queries`` the candidate queries (each charged
        its check and its answer).
    """

    epsilon: float
    delta: float
    unit: str
    mechanism: str
    gamma: float | None
    sigma: float | None
    n_queries: int
    partitions: int
    teachers: int
    data_dependent: bool
    order: float
    vote_shift: int | None = None
    sample_rate: float | None = None
    accountant: str | None = None
    max_grad_norm: float | None = None
    threshold: float | None = None
    sigma_threshold: float | None = None

    def as_dict(self) -> dict:
        """Every field under its own name, JSON-ready (plain floats, ints, str, bool, None); the DP-SGD
        fields only in a DP-SGD report and the threshold fields only in a Confident-GNMax one, so that
        other vote-noise reports keep their shape."""
        fields = asdict(self)
        hidden = (() if self.mechanism == DP_SGD_MECHANISM else _DP_SGD_FIELDS) + (
            () if self.mechanism == CONFIDENT_GNMAX_MECHANISM else _CONFIDENT_FIELDS
        )
        return {name: value for name, value in fields.items() if name not in hidden}


@dataclass(frozen=True)
class PrivacyAnalysis:
    """The data-independent and data-dependent guarantees of one run; no data-dependent one for a mechanism
    whose data-dependent bound is not released (Confident-GNMax, docs/budgets.md)."""

    data_independent: PrivacyReport
    data_dependent: PrivacyReport | None


@dataclass(frozen=True)
class JobPrivacyReport:
    """What a job's global model says about privacy, by the job's level; the budgets charge an L1 job from it.

    Attributes
    ----------
    level : str
        The job's privacy level: "L0" (no noise), "L1" (server noise) or "L2" (noise the silos added).
    data_independent, data_dependent : PrivacyReport or None
        L1 only: the bound known before the job ran (what is charged) and the one that depends on the vote
        margins (itself private, recorded, never charged).
    submissions : mapping or None
        L2 only: submission id (as text) → the report that submission declared (stored as it was uploaded).
    notes : tuple of str
        Plain sentences on what the global model used that no ε covers because none is spent on it (the
        operator's own rows of a semi-private model, :mod:`workers.algorithms.semi_private`); stored only when
        there is one.
    """

    level: str
    data_independent: PrivacyReport | None = None
    data_dependent: PrivacyReport | None = None
    submissions: Mapping[str, dict | None] | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """The stored shape: ``level`` and both bounds (``None`` unless L1), ``submissions`` at L2 only and ``notes``
        where there are any."""
        report: dict = {
            "level": self.level,
            "data_independent": _dict_or_none(self.data_independent),
            "data_dependent": _dict_or_none(self.data_dependent),
        }
        if self.submissions is not None:
            report["submissions"] = dict(self.submissions)
        if self.notes:
            report["notes"] = list(self.notes)
        return report


def _dict_or_none(report: PrivacyReport | None) -> dict | None:
    return None if report is None else report.as_dict()
