"""A job's parameters: the engine that owns its kind validates them (types, ranges and defaults, see
:mod:`workers.algorithms.registry` and :mod:`workers.algorithms.schema`); this module adds only what the
market knows: the federation's defaults, the size of its public data, the resolved privacy parameters of
an L1 job (the contract with the budgets app: ``parameters["privacy"]``), a default query for L1 jobs
that fits a new member's budget, and the refusal of settings that cannot train a model or would hold a
worker for too long (``ONEFOLD_JOB_MAX_WORK``).

What is stored on the job is the validated dictionary with every default filled in, so a job can be
repeated exactly from its row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from django.conf import settings

from market.errors import InvalidInput
from market.federations.models import Federation, PrivacyLevel
from workers.privacy.costs import (
    CONFIDENT_KEYS,
    DEFAULT_CONFIDENT_CHECK_NOISE_RATIO,
    DEFAULT_CONFIDENT_THRESHOLD_RATIO,
    DEFAULT_GNMAX_NOISE_RATIO,
    L1_MECHANISMS,
)

if TYPE_CHECKING:
    from workers.privacy.costs import BudgetView

#: The L1 noise of every kind that adds it (the market resolves it, ``_privacy``); the launcher shows it once.
PRIVACY_HELP = (
    'L1 only: {"mechanism": "gaussian" with "sigma" (the default, GNMax) | "laplace" with "gamma" | '
    '"confident_gnmax" with "sigma", "threshold" and "sigma_threshold", "delta"}; a Gaussian or Confident-GNMax '
    "job that names no sigma gets the σ and queries that fit its members' budgets."
)
#: One sentence per key of ``privacy`` that the launcher shows as its own input.
PRIVACY_KEY_HELP = {
    "mechanism": "L1 noise: gaussian (GNMax, the default) | laplace | confident_gnmax (Confident-GNMax: only the "
    "queries whose noisy largest vote count reaches the threshold are answered, with GNMax; every candidate "
    "query is charged its check and its answer).",
    "threshold": "confident_gnmax only: T, in votes, that a query's largest vote count plus noise must reach to be "
    "answered (default {threshold} × the most votes a query can hold).",
    "sigma_threshold": "confident_gnmax only: σ₁, in votes, the noise of the consensus check (default "
    "{check} × the most votes a query can hold).",
}
QUERY_KEYS = ("query_fraction", "query_count", "query", "proxy")
DEFAULT_GAMMA = 0.04
#: An L1 job that does not say how many rows to query queries its default (the federation's, else all rows)
#: but at most as many as fit in this share of a new member's ε limit, so that a silo can take part in two
#: default jobs (a fixed fraction of the public data cannot: all 3,000 rows of the demo at γ = 0.04 cost
#: ε 46.6 against a limit of 10).
L1_DEFAULT_SHARE_OF_LIMIT = 0.5
#: What an L0 job of a kind that names none of these keys gets, when the federation's evaluation split allows it
#: (:func:`_evaluation_allows_auto`): FedKT's ``vote: auto`` chooses among the vote rules, the selected ensemble
#: and the stacked fusion on half of the evaluation split and reports on the other half. ``validate`` does not know
#: the privacy level, so the market fills this in: L1 keeps the paper's vote, which is the only one it can charge.
L0_DEFAULTS = {"fedkt": {"vote": "auto"}}
#: The keys that name a job's final model (the second is FedKT's older alias).
FINAL_MODEL_KEYS = ("final_model", "final")
#: The fewest evaluation rows of each of two classes or more that let ``auto`` choose on one half and report on
#: the other with every such class in both.
AUTO_MIN_ROWS_PER_CLASS = 2
#: An L1 job that names no mechanism adds Gaussian noise (GNMax) of σ = this × the most votes a query can hold
#: (submissions × votes per submission), and queries the most rows that then fit (issue 25; chosen on
#: validation rows, docs/results/private.md): :func:`workers.privacy.costs.calibrate_gnmax`.
GNMAX_NOISE_RATIO = DEFAULT_GNMAX_NOISE_RATIO
#: A Confident-GNMax job that names no ``threshold`` (``sigma_threshold``) gets this share of the most votes a query
#: can hold (chosen on Adult's validation rows, docs/results/private.md, ``python -m workers.reproduce.confident``).
CONFIDENT_THRESHOLD_RATIO, CONFIDENT_CHECK_NOISE_RATIO = (
    DEFAULT_CONFIDENT_THRESHOLD_RATIO,
    DEFAULT_CONFIDENT_CHECK_NOISE_RATIO,
)


def _l1_defaults() -> dict:
    """What an L1 job of each kind gets when it names no final model: a few dozen noisy labels fit a regularised
    logistic regression better than the forest (issue 25; chosen on validation rows, docs/results/private.md)."""
    from workers.algorithms.fusions import DEFAULT_PRIVATE_FINAL_MODEL  # on use, as in _algorithms

    return {"fedkt": {"final_model": dict(DEFAULT_PRIVATE_FINAL_MODEL)}}


def _algorithms() -> dict:
    # Imported on use: the engines load torch (seconds), which a web process pays only once it needs a job kind.
    import workers.algorithms  # noqa: F401  (registers every job kind)
    from workers.algorithms.registry import ALGORITHMS

    return ALGORITHMS


def job_kind_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of the registered job kinds (:func:`workers.algorithms.registry.kind_choices`): the
    job model's choices, the only kinds the API accepts and the launcher offers."""
    from workers.algorithms import kind_choices  # on use, as in _algorithms

    return kind_choices()


def job_kind_refusal(kind: object) -> str:
    """The sentence that refuses a kind that is not registered."""
    refusal = (
        f"Jobs of kind {kind!r} cannot run here; choose one of {', '.join(sorted(_algorithms()))}."
    )
    if kind == "fd":
        refusal += (
            " Federated distillation is an exchange between silos (/api/exchanges/), not a job."
        )
    return refusal


def job_kind_get(kind: str):
    """The registered engine of ``kind`` (:class:`workers.algorithms.registry.FusionAlgorithm`); InvalidInput with
    :func:`job_kind_refusal` for any other kind."""
    if kind not in _algorithms():
        raise InvalidInput(job_kind_refusal(kind))
    return _algorithms()[kind]


def job_parameter_help() -> dict[str, str]:
    """One sentence per parameter of every runnable kind, as the engines declare them (a name two kinds explain
    differently is shown once per kind); parameters that share a sentence share a line."""
    sentences: dict[str, str] = {}
    for kind, _ in job_kind_choices():
        for name, text in _algorithms()[kind].help.items():
            sentences.setdefault(
                name if sentences.get(name, text) == text else f"{name} ({kind})", text
            )
    names_by_text: dict[str, list[str]] = {}
    for name, text in sentences.items():
        names_by_text.setdefault(text, []).append(name)
    return (
        {" / ".join(names): text for text, names in names_by_text.items()}
        | {"privacy": PRIVACY_HELP}
        | {
            name: text.format(
                threshold=CONFIDENT_THRESHOLD_RATIO, check=CONFIDENT_CHECK_NOISE_RATIO
            )
            for name, text in PRIVACY_KEY_HELP.items()
        }
    )


def _mechanism(value: Mapping, *, federation: Federation) -> str:
    """The mechanism an L1 job names, or the one its noise parameter implies, else the default (Gaussian)."""
    defaults = federation.default_parameters or {}
    if "mechanism" in value:
        mechanism = value["mechanism"]
    elif "gamma" in value or ("sigma" not in value and "gamma" in defaults):
        mechanism = "laplace"
    else:
        mechanism = "gaussian"
    if mechanism not in L1_MECHANISMS:
        raise InvalidInput(
            f"The noise mechanism must be one of {', '.join(map(repr, L1_MECHANISMS))}, not {mechanism!r}."
        )
    return mechanism


def _given_privacy(value) -> dict:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInput(f"'privacy' must be a JSON object, not {value!r}. {PRIVACY_HELP}")
    return dict(value or {})


def _confident(value: Mapping, *, most_votes: int) -> dict:
    """Confident-GNMax's threshold T and check noise σ₁ (votes): as given, else the default shares of the most votes
    a query can hold. InvalidInput for a value that is not a positive number, or a T above those votes (no query
    could reach it but by noise)."""
    from workers.algorithms.schema import finite_number

    resolved = {
        "threshold": value.get("threshold", CONFIDENT_THRESHOLD_RATIO * most_votes),
        "sigma_threshold": value.get("sigma_threshold", CONFIDENT_CHECK_NOISE_RATIO * most_votes),
    }
    for name, number in resolved.items():
        if not finite_number(number) or number <= 0:
            raise InvalidInput(
                f"'privacy.{name}' must be a positive number of votes, not {number!r}. {PRIVACY_HELP}"
            )
    if resolved["threshold"] > most_votes:
        raise InvalidInput(
            f"'privacy.threshold' is {resolved['threshold']:g} votes, above the {most_votes} votes a query of this "
            f"job can hold: no query could pass the consensus check but by noise; give at most {most_votes}."
        )
    return {name: float(number) for name, number in resolved.items()}


def _privacy(
    value,
    *,
    federation: Federation,
    n_queries: int,
    sigma: float | None = None,
    most_votes: int = 1,
) -> dict:
    """The resolved privacy parameters of an L1 job; ``sigma``: the calibrated σ of a Gaussian (or Confident-GNMax)
    job that names none; ``most_votes``: the most votes a query can hold (Confident-GNMax's default T and σ₁)."""
    defaults = federation.default_parameters or {}
    value = _given_privacy(value)
    mechanism = _mechanism(value, federation=federation)
    extra = [name for name in CONFIDENT_KEYS if name in value]
    if extra and mechanism != "confident_gnmax":
        raise InvalidInput(
            f'\'privacy.{extra[0]}\' applies to "mechanism": "confident_gnmax" only; remove it or choose '
            "that mechanism."
        )
    noise_name = "gamma" if mechanism == "laplace" else "sigma"
    noise = value.get(
        noise_name, defaults.get(noise_name, DEFAULT_GAMMA if mechanism == "laplace" else sigma)
    )
    delta = value.get("delta", float(federation.default_delta))
    from workers.algorithms.schema import finite_number

    for name, number in ((noise_name, noise), ("delta", delta)):
        if not finite_number(number) or number <= 0:
            raise InvalidInput(
                f"'privacy.{name}' must be a positive number, not {number!r}. {PRIVACY_HELP}"
            )
    if delta >= 1:
        raise InvalidInput(f"'privacy.delta' must be below 1, not {delta}.")
    return {
        "mechanism": mechanism,
        "gamma": float(noise) if mechanism == "laplace" else None,
        "sigma": None if mechanism == "laplace" else float(noise),
        "delta": float(delta),
        "n_queries": n_queries,
        **(_confident(value, most_votes=most_votes) if mechanism == "confident_gnmax" else {}),
    }


#: The budgets an L1 job is calibrated to: given the votes one submission moves, each chosen silo's
#: :class:`workers.privacy.costs.BudgetView` (its limit, δ, committed costs and the votes its data moves).
MemberBudgets = Callable[[int], Sequence["BudgetView"]]


def _budget_views(
    *, federation: Federation, vote_shift: int, member_budgets: MemberBudgets | None
) -> list:
    """A new member's share of the default limit, and every chosen silo's remaining budget when known."""
    from workers.privacy.costs import BudgetView

    new_member = BudgetView(
        epsilon_limit=float(federation.default_epsilon_limit) * L1_DEFAULT_SHARE_OF_LIMIT,
        delta=float(federation.default_delta),
        vote_shift=vote_shift,
    )
    return [new_member, *(member_budgets(vote_shift) if member_budgets else ())]


def _l1_default_query(
    *,
    kind: str,
    validated: dict,
    given_privacy,
    federation: Federation,
    n_public: int,
    most_votes: int,
    member_budgets: MemberBudgets | None = None,
) -> dict:
    """The most rows (at most all of them) whose data-independent ε fits the share of a new member's limit and,
    where ``member_budgets`` gives them and they leave room for the fewest rows a model trains on, every chosen
    silo's remaining budget."""
    from workers.algorithms.schema import MIN_TRAINING_ROWS
    from workers.privacy.costs import calibrate_queries

    privacy = _privacy(given_privacy, federation=federation, n_queries=0, most_votes=most_votes)
    algorithm = job_kind_get(kind)
    # A weighted vote moves s × W votes per submission: the default query must fit at that cost (never under-charge).
    vote_shift = algorithm.votes_per_submission(validated)

    def most_rows(budgets) -> int:
        return calibrate_queries(
            _budget_views(federation=federation, vote_shift=vote_shift, member_budgets=budgets),
            privacy=privacy,
            price=lambda at, shift: algorithm.l1_cost(validated, privacy=at, vote_shift=shift),
            max_queries=n_public,
        )

    count = most_rows(member_budgets)
    if member_budgets is not None and count < MIN_TRAINING_ROWS:
        # Too little left to train a model: the new member's share stands, and the reservation refuses the job
        # naming the silos short of budget (rather than a query too small to train on).
        count = most_rows(None)
    return {"query_count": max(1, count)}


def _evaluation_allows_auto(federation: Federation) -> bool:
    """Whether the federation's evaluation split (the one a job reads) holds :data:`AUTO_MIN_ROWS_PER_CLASS` rows
    of at least two classes, so that both of its halves hold them."""
    split = federation.evaluation_splits.first()
    counts = split.class_counts if split is not None else []
    return sum(count >= AUTO_MIN_ROWS_PER_CLASS for count in counts) >= 2


def _most_votes(
    *, kind: str, validated: dict, federation: Federation, n_submissions: int | None
) -> int:
    """The most votes one query of the job can hold: its submissions (default: the federation's members) × the votes
    one submission casts."""
    voters = n_submissions or max(1, federation.members.count())
    return voters * job_kind_get(kind).votes_per_submission(validated)


def _gnmax_default(
    *,
    kind: str,
    validated: dict,
    federation: Federation,
    most_queries: int,
    n_queries: int | None,
    most_votes: int,
    member_budgets: MemberBudgets | None,
    confident: Mapping | None = None,
) -> tuple[float, int]:
    """σ and the number of queries of a Gaussian L1 job that names no σ: :func:`workers.privacy.costs.calibrate_gnmax`
    (σ in proportion to the most votes a query holds, then the most queries that fit) when it names no query,
    else the least σ that fits its ``n_queries``; at most ``most_queries`` rows (the federation's default query,
    else every public row). Fits a new member's share of the default limit and every
    chosen silo's remaining budget; where nothing fits, the noise of the ratio at the fewest rows (the budgets
    then refuse the job, naming the silos short of budget). ``confident``: a Confident-GNMax job's resolved threshold
    and sigma_threshold (held fixed; σ is its answers' σ₂)."""
    from workers.algorithms.schema import MIN_TRAINING_ROWS
    from workers.privacy.costs import calibrate_gnmax, calibrate_noise

    algorithm = job_kind_get(kind)
    per_submission = algorithm.votes_per_submission(validated)
    views = _budget_views(
        federation=federation, vote_shift=per_submission, member_budgets=member_budgets
    )
    delta = float(federation.default_delta)
    sigma = GNMAX_NOISE_RATIO * most_votes

    def price(at, shift):
        return algorithm.l1_cost(validated, privacy=at, vote_shift=shift)

    if n_queries is not None:
        privacy = {
            "mechanism": "gaussian" if confident is None else "confident_gnmax",
            "gamma": None,
            "delta": delta,
            "n_queries": n_queries,
            **(confident or {}),
        }
        calibrated = calibrate_noise(views, privacy=privacy, price=price)
        return (calibrated if calibrated is not None else max(sigma, 1e6)), n_queries
    solved = calibrate_gnmax(
        views,
        total_votes=most_votes,
        noise_ratio=GNMAX_NOISE_RATIO,
        delta=delta,
        price=price,
        min_queries=MIN_TRAINING_ROWS,
        max_queries=most_queries,
        confident=confident,
    )
    if solved is None:
        return sigma, min(MIN_TRAINING_ROWS, most_queries)
    return solved["sigma"], solved["n_queries"]


def _with_query(validated: dict, query: dict) -> dict:
    return {**{key: value for key, value in validated.items() if key not in QUERY_KEYS}, **query}


def job_parameters_validate(
    *,
    kind: str,
    privacy_level: str,
    parameters: Mapping | None,
    federation: Federation,
    n_public: int,
    n_submissions: int | None = None,
    member_budgets: MemberBudgets | None = None,
) -> dict:
    """The job's parameters with defaults filled in, or InvalidInput naming the first problem.

    An L1 job that names no mechanism (or names "gaussian" without σ) gets GNMax calibrated to fit a new member's
    share of the default limit and, where ``member_budgets`` gives them, the chosen silos' remaining budgets;
    ``n_submissions`` (default: the federation's members) sets the most votes a query holds, which σ follows."""
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidInput(
            'Give the parameters as a JSON object, e.g. {"partitions": 2, "query_fraction": 0.1}.'
        )
    given = dict(parameters or {})
    algorithm = job_kind_get(kind)
    if privacy_level == PrivacyLevel.L0 and _evaluation_allows_auto(federation):
        given = {**L0_DEFAULTS.get(kind, {}), **given}
    if privacy_level == PrivacyLevel.L1 and not given.keys() & set(FINAL_MODEL_KEYS):
        given = {**_l1_defaults().get(kind, {}), **given}
    if privacy_level == PrivacyLevel.L1 and not algorithm.accepts_noise:
        labels = [noisy.label for noisy in _algorithms().values() if noisy.accepts_noise]
        raise InvalidInput(
            f"Server noise (L1) is only available for {' and '.join(labels)} jobs; choose L0 or L2 for this kind."
            + (f" {algorithm.noise_refusal({})}" if algorithm.noise_refusal({}) else "")
        )
    if "privacy" in given and privacy_level != PrivacyLevel.L1:
        raise InvalidInput(
            "Only L1 jobs take privacy parameters: the server adds noise only at L1."
        )
    if "seed" in given:
        raise InvalidInput(
            "Give the seed as the job's own 'seed' field, not inside its parameters."
        )
    from workers.algorithms.schema import query_rows

    query_given = any(key in given for key in QUERY_KEYS)
    queries = "query_fraction" in algorithm.keys
    federation_query = {
        key: value
        for key, value in (federation.default_parameters or {}).items()
        if queries and key in ("query_fraction", "query_count")
    }
    try:
        validated = algorithm.validate(given if query_given else {**federation_query, **given})
    except ValueError as error:
        raise InvalidInput(f"The {kind} parameters are not valid: {error}") from error
    refusal = algorithm.noise_refusal(validated)
    if privacy_level == PrivacyLevel.L1 and refusal:
        raise InvalidInput(refusal)
    given_privacy = _given_privacy(given.get("privacy"))
    defaults = federation.default_parameters or {}
    calibrated_sigma = None
    most_votes, mechanism = 1, None
    if (
        privacy_level == PrivacyLevel.L1
    ):  # only kinds that accept noise get here (refused above otherwise)
        most_votes = _most_votes(
            kind=kind, validated=validated, federation=federation, n_submissions=n_submissions
        )
        mechanism = _mechanism(given_privacy, federation=federation)
    if (
        mechanism in ("gaussian", "confident_gnmax")
        and "sigma" not in given_privacy
        and "sigma" not in defaults
    ):
        calibrated_sigma, count = _gnmax_default(
            kind=kind,
            validated=validated,
            federation=federation,
            most_queries=query_rows(validated, n_public=n_public),
            n_queries=query_rows(validated, n_public=n_public) if query_given else None,
            most_votes=most_votes,
            member_budgets=member_budgets,
            confident=(
                _confident(given_privacy, most_votes=most_votes)
                if mechanism == "confident_gnmax"
                else None
            ),
        )
        if not query_given and count < query_rows(validated, n_public=n_public):
            validated = _with_query(validated, {"query_count": count})
    elif queries and not query_given and privacy_level == PrivacyLevel.L1:
        fitting = _l1_default_query(
            kind=kind,
            validated=validated,
            given_privacy=given_privacy,
            federation=federation,
            n_public=n_public,
            most_votes=most_votes,
            member_budgets=member_budgets,
        )
        if query_rows(validated, n_public=n_public) > fitting["query_count"]:
            validated = _with_query(validated, fitting)
    if validated.get("query_count", 0) > n_public:
        raise InvalidInput(
            f"The server can query 1 to {n_public} public examples (the public data's size), "
            f"not {validated['query_count']}."
        )
    validated.pop("privacy", None)
    if privacy_level == PrivacyLevel.L1:
        validated["privacy"] = _privacy(
            given_privacy,
            federation=federation,
            n_queries=query_rows(validated, n_public=n_public),
            sigma=calibrated_sigma,
            most_votes=most_votes,
        )
    return validated


def job_workload_check(
    *, kind: str, parameters: dict, n_public: int, n_classes: int, n_member_models: int
) -> float:
    """Refuse settings that cannot train a model or exceed ``ONEFOLD_JOB_MAX_WORK``; the estimated work otherwise."""
    from workers.algorithms.schema import MIN_TRAINING_ROWS

    estimate = job_kind_get(kind).estimate(
        parameters, n_public=n_public, n_member_models=n_member_models
    )
    needed = max(MIN_TRAINING_ROWS, n_classes)
    if estimate.training_rows is not None and estimate.training_rows < needed:
        raise InvalidInput(
            f"These settings query {estimate.training_rows} public row(s), too few to train a model "
            f'on {n_classes} classes; query at least {needed} (e.g. "query_count": {needed}, or '
            '"query_fraction": 1 for every row).'
        )
    limit = settings.ONEFOLD_JOB_MAX_WORK
    if estimate.work > limit:
        raise InvalidInput(
            f"This job would need about {estimate.work:.3g} row-passes of work (member models × public "
            f"rows, plus the fit: e.g. trees × depth × queried rows), above this market's limit of "
            f"{limit:.3g}; use fewer trees or epochs, a shallower model or fewer queried rows."
        )
    return estimate.work


def job_parameter_defaults(
    *, kind: str, federation: Federation, n_public: int, privacy_level: str
) -> dict:
    """The defaults of a kind, as the launcher form shows them."""
    return job_parameters_validate(
        kind=kind,
        privacy_level=privacy_level,
        parameters={},
        federation=federation,
        n_public=n_public,
    )
