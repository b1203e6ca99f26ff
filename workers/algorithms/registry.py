"""One calling convention for every way of fusing uploaded models into a global model.

A job (``market.jobs``) never holds all members at once: it fans out over chunks of members, and
each chunk turns every member's predicted probabilities on the public data into a *signal* with
:meth:`FusionAlgorithm.member_signal`. Signals are summable, so chunks return partial sums and a
callback adds them up and calls :meth:`FusionAlgorithm.fuse` once. Selection of members (Guha's
strategies) happens before the fan-out, from declared metadata only.

Signals per kind (all arrays are ``(n_public, n_classes)``):

- FedKT: the member's consistent votes: ``s`` on class m where all its ``s`` students predict m,
  else zeros (:func:`workers.algorithms.voting.consistent_vote_counts`).
- Ensemble and distillation: the member's averaged class probabilities.
- Cohort distillation: the cohort's logits scaled per class by its count of that class; ``fuse``
  divides by the class totals (CPFL section 3.1).

Privacy is composed in: ``fuse`` receives ``noise`` (``None`` or a mechanism with
``noisy_counts``), never a flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from workers.privacy.costs import PrivacyCost
    from workers.privacy.settings import PrivacySettings

#: FedKT's privacy levels (section 4): no noise, noise the server adds to the votes (party-level DP), noise each silo
#: added before uploading (example-level DP). A job is run at one; its kind may default its parameters by it
#: (:meth:`FusionAlgorithm.level_defaults`).
PRIVACY_LEVELS = ("L0", "L1", "L2")
#: How a kind's global model combines the members, as contribution values re-count it for a coalition
#: (workers.valuation): their hard votes, their averaged probabilities, or cohort distillation's class-weighted
#: log-probabilities.
VALUATION_RULES = ("vote", "average", "cohort")


@dataclass(frozen=True)
class Member:
    """One uploaded submission as the engines see it: declared metadata, no data.

    ``key`` identifies the submission, ``organisation`` the silo (both as text); ``n_models`` is the
    number of model files the job gives the engine for it: its FedKT students and, when ``own_model``,
    last, the silo's own model trained on all its rows (issue 31: its best model, which never votes in
    FedKT; :func:`member_model_positions`); ``label_distribution`` is a count or share per class, or
    ``None`` if not declared; ``teachers`` the FedKT t the silo declared it trained with, if any;
    ``disjoint_partitions`` whether the silo declared that each of its students was fitted on its own partition of
    its rows, the partitions disjoint (what a record-level L1 job's sensitivity rests on).
    """

    key: str
    organisation: str
    n_examples: int
    validation_score: float
    n_models: int = 1
    label_distribution: tuple[float, ...] | None = None
    own_model: bool = False
    teachers: int | None = None
    disjoint_partitions: bool = False

    @property
    def n_students(self) -> int:
        """The member's FedKT students: its models but the own model."""
        return self.n_models - int(self.own_model)


@dataclass(frozen=True)
class MemberModelPositions:
    """Which of a member's models (by position) are its FedKT ``students`` and which make its ``best``
    prediction: its own model when it has one, else all its students (averaged)."""

    students: tuple[int, ...]
    best: tuple[int, ...]


@dataclass(frozen=True)
class MemberProbabilities:
    """A member's probabilities split by :func:`member_probabilities_split`: ``students``
    ``(n_students, n_rows, K)`` and ``best`` ``(n_rows, K)``."""

    students: np.ndarray
    best: np.ndarray


def member_model_positions(member: Member) -> MemberModelPositions:
    """The one rule for a member's models: the own model, when present, is the last; every other is a student.

    FedKT votes with the students only (the own model was trained on all the silo's rows without the
    partition-and-teacher structure the privacy analysis assumes); ensembles, distillation, the evaluation
    metrics and the silo baselines use the best prediction."""
    if member.own_model and member.n_models < 1:
        raise ValueError(
            f"Submission #{member.key} is said to hold an own model but holds no model."
        )
    students = tuple(range(member.n_students))
    return MemberModelPositions(students, (member.n_models - 1,) if member.own_model else students)


def member_probabilities_split(probabilities, *, member: Member) -> MemberProbabilities:
    """Split a member's probabilities ``(n_models, n_rows, K)`` into its students' and its best
    (:func:`member_model_positions`): the own model's when it has one, else the students' average."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 3 or len(probabilities) != member.n_models:
        raise ValueError(
            f"Expected the probabilities of submission #{member.key}'s {member.n_models} model(s) "
            f"as (n_models, n_rows, n_classes), got shape {probabilities.shape}."
        )
    positions = member_model_positions(member)
    students = probabilities[list(positions.students)]
    if not len(students) and not member.own_model:
        raise ValueError(f"Submission #{member.key} holds no model.")
    return MemberProbabilities(students, probabilities[list(positions.best)].mean(axis=0))


@dataclass(frozen=True)
class Fusion:
    """The result of :meth:`FusionAlgorithm.fuse`.

    Attributes
    ----------
    model : fitted classifier or None
        The global model (scikit-learn contract, ``classes_ = 0..K-1``); ``None`` when the global
        model is the selected members themselves (an ensemble bundle).
    labels : int array (n_public,)
        The class the fused teacher assigns to each public example, ``-1`` where it abstains.
    trained : bool array (n_public,)
        Public examples the global model was fitted on (all False for a bundle).
    privacy : workers.privacy.reports.PrivacyAnalysis or None
        ``None`` unless noise was added by this fusion (L1).
    details : dict
        JSON-ready facts worth recording (e.g. queried count, abstentions, distillation fidelity).
    """

    model: Any
    labels: np.ndarray
    trained: np.ndarray
    privacy: Any = None
    details: dict = field(default_factory=dict)


@runtime_checkable
class FusionAlgorithm(Protocol):
    """What every job kind implements. ``params`` are the job's validated parameters.

    The kind owns its name in the API and its ``label`` (what the launcher and the job pages show), and its
    parameters: ``keys`` and ``help`` (one sentence per key, for the launcher and the
    docs), ``validate`` (types, ranges and defaults from :mod:`workers.algorithms.schema`; what it
    returns is what a job stores), ``accepts_noise`` (whether an L1 job may add server noise to its
    fusion), ``noise_refusal`` (why validated settings cannot take that noise), ``reads_evaluation``
    (whether ``fuse`` needs the evaluation split), ``estimate`` (the rows its fit uses and the work it
    implies, before anything runs) and ``level_defaults`` (what a job at a privacy level gets where it names
    nothing: ``validate`` itself does not know the level).
    """

    name: str
    label: str
    keys: tuple[str, ...]
    help: dict[str, str]
    #: The values a setting may take where they are a short list, by its path in the settings ("vote",
    #: "final_model.family"): the launcher offers them as choices (the conformance test validates every one).
    choices: dict[str, tuple]
    accepts_noise: bool

    def validate(self, params: Mapping) -> dict:
        """``params`` with every default filled in; a ValueError whose sentence names the bad key."""

    def noise_refusal(self, settings: Mapping) -> str | None:
        """Why validated ``settings`` cannot run with server noise (L1), or None."""

    def level_defaults(
        self, params: Mapping, *, privacy_level: str, evaluation_class_counts: Sequence[int]
    ) -> dict:
        """``params`` (as a request gives them, before ``validate``) with what a job at ``privacy_level`` (one of
        :data:`PRIVACY_LEVELS`) gets where it names nothing; ``evaluation_class_counts``: the rows of each class in
        the federation's evaluation split (a default fitted on it needs enough of them)."""

    def reads_evaluation(self, settings: Mapping) -> bool:
        """Whether ``fuse`` needs the federation's evaluation split (its ``evaluation=`` argument)."""

    def report_sentence(self, details: Mapping, *, report_rows: int) -> str | None:
        """The job log's sentence on how ``fuse`` read the evaluation split (what it chose or fitted on its first
        half), from the fusion's ``details``; None where it read none (the runner then says the metrics are on the
        ``report_rows`` rows of the report half)."""

    def privacy_notes(self, details: Mapping) -> tuple[str, ...]:
        """Plain sentences the job's privacy report carries about the fusion (e.g. rows it learnt from that cost
        no silo any ε), from its ``details``."""

    def valuation_rule(self, settings: Mapping, details: Mapping) -> str | None:
        """How a coalition of silos is re-combined to value each silo's contribution (workers.valuation): one of
        :data:`VALUATION_RULES`, from the job's stored ``settings`` and its fusion's ``details``; None where the
        global model combines no silo's output."""

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int):
        """A :class:`workers.algorithms.schema.WorkEstimate` of validated ``settings``."""

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        """Indices of the members to use, in a deterministic order."""

    def member_signal(
        self, probabilities: np.ndarray, *, member: Member, n_classes: int, params: Mapping
    ) -> np.ndarray:
        """One member's summable signal from its models' probabilities ``(n_models, n_public, K)``."""

    def fuse(
        self,
        signal_sum: np.ndarray,
        public_features: np.ndarray,
        *,
        members: Sequence[Member],
        n_classes: int,
        params: Mapping,
        noise=None,
        seed: int,
    ) -> Fusion:
        """Fuse the summed signal of ``members`` into a global model."""


class ServerNoisePrice(Protocol):
    """What a kind with ``accepts_noise`` adds: its L1 price, which the budgets reserve and charge.

    ``votes_per_submission`` is the sensitivity (the votes one submission's data can move per noisy query; a silo
    with k submissions in a job moves k times as many, :func:`workers.privacy.accounting.party_vote_shifts`) and
    ``l1_cost`` the data-independent cost of a job to one silo, known before the job runs, in the unit the job
    protects (``privacy_units``: the units of :data:`workers.privacy.settings.PRIVACY_UNITS` the kind can run;
    ``votes_cast_per_submission``: the votes one submission casts per query, which is what the noise is scaled
    to — the sensitivity is less where a record moves one student's vote only).
    """

    privacy_units: tuple[str, ...]

    def votes_per_submission(self, settings: Mapping) -> int:
        """Votes one submission's data moves per query of a job with validated ``settings`` (its unit's)."""

    def votes_cast_per_submission(self, settings: Mapping) -> int:
        """Votes one submission casts per query of a job with validated ``settings``."""

    def l1_cost(
        self,
        settings: Mapping,
        *,
        privacy: PrivacySettings | Mapping,
        vote_shift: int | None = None,
    ) -> PrivacyCost:
        """The cost, in the job's unit, to a silo whose data moves ``vote_shift`` votes per query (default one
        submission's); ``privacy``: the job's :class:`~workers.privacy.settings.PrivacySettings`, their stored
        shape or a stored report of the noise (the same keys). A ValueError names what is wrong."""

    def vote_weight_parameters(self, weight: int) -> dict:
        """The parameters under which each submission's votes carry integer weights up to ``weight`` (W > 1): the
        dry-run price API's ``vote_weight`` shorthand."""


ALGORITHMS: dict[str, FusionAlgorithm] = {}


class NoiselessFusion:
    """The protocol's defaults for a kind that takes no server noise (it runs at L0 and on L2 submissions, whose
    noise the silos added): a kind subclasses it and overrides only what differs, as Flower's ``FedProx(FedAvg)``
    does. Its defaults are the same at every level, it needs no evaluation split and its ``fuse`` refuses noise
    (:meth:`noise_refused`)."""

    accepts_noise = False
    label: str
    choices: dict[str, tuple] = {}

    @staticmethod
    def level_defaults(
        params: Mapping, *, privacy_level: str, evaluation_class_counts: Sequence[int]
    ) -> dict:
        """``params`` as given: the kind's defaults are the same at every level (``validate`` fills them in)."""
        return dict(params or {})

    @staticmethod
    def noise_refusal(settings: Mapping) -> str | None:
        """None: the kind takes no server noise at all (``accepts_noise`` refuses L1 first)."""
        return None

    @staticmethod
    def reads_evaluation(settings: Mapping) -> bool:
        """False: the kind fuses from the public rows only."""
        return False

    @staticmethod
    def report_sentence(details: Mapping, *, report_rows: int) -> str | None:
        """None: the kind reads no evaluation split."""
        return None

    @staticmethod
    def privacy_notes(details: Mapping) -> tuple[str, ...]:
        """None: the kind takes no noise and learns from the public rows only."""
        return ()

    def noise_refused(self, noise) -> None:
        """The guard at the top of ``fuse``: a caller of the core (a simulation, a test) that passes noise gets a
        ValueError, since no accountant would charge it."""
        if noise is not None:
            raise ValueError(
                self.noise_refusal({})
                or f"{self.label} adds no noise; run it at L0 or on L2 submissions."
            )


def register(algorithm: FusionAlgorithm) -> FusionAlgorithm:
    """Add an algorithm to :data:`ALGORITHMS` under its ``name``."""
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def kind_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered kind, in registration order: the job model's choices, the API's
    and the launcher's. Nothing else is a job kind."""
    return [(name, algorithm.label) for name, algorithm in ALGORITHMS.items()]


def algorithm_get(name: str) -> FusionAlgorithm:
    """The algorithm registered as ``name``; a ValueError naming the known ones otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"Unknown algorithm {name!r}; known: {', '.join(sorted(ALGORITHMS))}.")
    return ALGORITHMS[name]


def agreement_counts(signal: np.ndarray, labels: np.ndarray) -> int:
    """Public examples where a member's signal (its arg-max, when non-zero) agrees with the fused label.

    The documented contribution rule of every job kind: a silo's weight is its members' agreement
    counts over the examples the global model was trained on, normalised to sum to 1.
    """
    signal = np.asarray(signal)
    voted = signal.any(axis=1)
    return int(np.count_nonzero(voted & (signal.argmax(axis=1) == np.asarray(labels))))
