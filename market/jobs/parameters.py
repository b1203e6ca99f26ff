"""A job's parameters: the engine that owns its kind validates them (types, ranges and defaults, see
:mod:`workers.algorithms.registry` and :mod:`workers.algorithms.schema`) and says what a job at each privacy level
gets where it names nothing (``level_defaults``); its server noise is :class:`workers.privacy.settings.
PrivacySettings`, resolved once here. This module adds only what the market knows: the federation's defaults,
the size of its public data and its evaluation split, the budget an L1 job is calibrated to (the engine's plan,
:func:`workers.privacy.plans.l1_plan`, chooses its noise and query count),
and the refusal of settings that cannot train a model or would hold a worker for too long
(``ONEFOLD_JOB_MAX_WORK``). It names no engine parameter: it asks the engine.

What is stored on the job is the validated dictionary with every default filled in (the noise as
``parameters["privacy"]``, the contract with the budgets app), so a job can be repeated exactly from its row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.conf import settings

from market.errors import InvalidInput
from market.federations.models import Federation, PrivacyLevel
from workers.privacy.settings import (
    L1_MECHANISMS,
    PRIVACY_HELP,
    PRIVACY_KEY_HELP,
    UNIT_LABELS,
    privacy_given,
    privacy_unit,
)

if TYPE_CHECKING:
    from workers.privacy.costs import BudgetView
    from workers.privacy.plans import L1Plan

#: An L1 job that does not say how many rows to query queries its default (the federation's, else all rows)
#: but at most as many as fit in this share of a new member's ε limit, so that a silo can take part in two
#: default jobs (a fixed fraction of the public data cannot: all 3,000 rows of the demo at γ = 0.04 cost
#: ε 46.6 against a limit of 10).
L1_DEFAULT_SHARE_OF_LIMIT = 0.5


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


def job_kind_default() -> str:
    """The kind a page or a form that names none starts from: the first registered one (the launcher's first)."""
    return job_kind_choices()[0][0]


def job_kind_priced_default() -> str:
    """The kind a privacy price that names none is for: the first registered kind that adds server noise at L1."""
    return next(name for name, _ in job_kind_choices() if job_kind_get(name).accepts_noise)


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
    differently is shown once per kind); parameters that share a sentence share a line; then the noise's
    (:mod:`workers.privacy.settings`)."""
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
        | PRIVACY_KEY_HELP
    )


def job_parameter_choices() -> dict[str, dict[str, list]]:
    """Per runnable kind, the values each short-list setting may take, by its path ("vote", "final_model.family",
    "privacy.mechanism" where the kind takes server noise), as the engines declare them: the launcher offers them
    as choices instead of free text."""
    algorithms = _algorithms()
    return {
        kind: {path: list(values) for path, values in algorithms[kind].choices.items()}
        | (
            {
                "privacy.mechanism": list(L1_MECHANISMS),
                "privacy.unit": list(algorithms[kind].privacy_units),
            }
            if algorithms[kind].accepts_noise
            else {}
        )
        for kind, _ in job_kind_choices()
    }


def _invalid(error: ValueError) -> InvalidInput:
    """A ValueError of the pure core (a sentence for the person who asked) as the API's refusal."""
    return InvalidInput(str(error))


def _l1_plan(
    *,
    kind: str,
    validated: dict,
    given_privacy: Mapping,
    federation: Federation,
    n_queries: int,
    query_named: bool,
    most_votes: int,
) -> L1Plan:
    """The engine's checked, priced plan of an L1 job (:func:`workers.privacy.plans.l1_plan`), calibrated to
    :func:`_budget_views`; InvalidInput with the engine's sentence where nothing fits."""
    from workers.algorithms.schema import MIN_TRAINING_ROWS, takes_query
    from workers.privacy.plans import PlanRequest, l1_plan

    algorithm = job_kind_get(kind)
    request = PlanRequest(
        settings=validated,
        given_privacy=given_privacy,
        defaults=federation.default_parameters or {},
        delta=float(federation.default_delta),
        n_queries=n_queries,
        query_named=query_named,
        takes_query=takes_query(algorithm.keys),
        most_votes=most_votes,
        min_queries=MIN_TRAINING_ROWS,
    )
    try:
        return l1_plan(
            kind=algorithm,
            request=request,
            budgets=_budget_views(federation=federation),
            budgets_named=BUDGET_VIEWS_NAMED,
        )
    except ValueError as error:
        raise _invalid(error) from error


def _budget_views(*, federation: Federation) -> list[BudgetView]:
    """What an L1 job is calibrated to: a new member's share of the federation's default limit, which every member
    may read. Never the chosen silos' remaining budgets: a σ or a query count fitted to them would tell every
    reader of the job (its API, its card) another silo's remainder; the reservation refuses a job a silo cannot
    afford, naming to a non-operator only its own silo."""
    from workers.privacy.costs import BudgetView

    return [
        BudgetView(
            epsilon_limit=float(federation.default_epsilon_limit) * L1_DEFAULT_SHARE_OF_LIMIT,
            delta=float(federation.default_delta),
        )
    ]


#: How a refusal names the budget an L1 job is calibrated to (:func:`_budget_views`).
BUDGET_VIEWS_NAMED = "a new member's share of this federation's default limit"


def _evaluation_class_counts(federation: Federation) -> list[int]:
    """The rows of each class in the federation's evaluation split (the one a job reads); none without one."""
    split = federation.evaluation_splits.first()
    return list(split.class_counts) if split is not None else []


def _most_votes(
    *, kind: str, validated: dict, federation: Federation, n_submissions: int | None
) -> int:
    """The most votes one query of the job can hold: its submissions (default: the federation's members) × the votes
    one submission casts."""
    voters = n_submissions or max(1, federation.members.count())
    return voters * job_kind_get(kind).votes_cast_per_submission(validated)


def _unit_accepted(given_privacy: Mapping, *, federation: Federation, algorithm, kind: str) -> str:
    """The unit an L1 job protects (``privacy.unit``), or InvalidInput where the kind cannot run it or the
    federation's members do not accept it (``Federation.privacy_units``)."""
    try:
        unit = privacy_unit(given_privacy)
    except ValueError as error:
        raise _invalid(error) from error
    if unit not in algorithm.privacy_units:
        raise InvalidInput(
            f"Jobs of kind {kind!r} cannot protect the {unit} ({UNIT_LABELS[unit]}); choose 'privacy.unit' "
            f"{' or '.join(map(repr, algorithm.privacy_units))}."
        )
    accepted = list(federation.privacy_units or [])
    if unit not in accepted:
        raise InvalidInput(
            f"The members of '{federation.slug}' accept L1 jobs that protect "
            f"{' or '.join(f'the {name} ({UNIT_LABELS[name]})' for name in accepted) or 'no unit'} only, not the "
            f"{unit} ({UNIT_LABELS[unit]}); choose 'privacy.unit' {' or '.join(map(repr, accepted))}, or ask an "
            "operator to accept the unit for this federation."
        )
    return unit


def job_parameters_validate(
    *,
    kind: str,
    privacy_level: str,
    parameters: Mapping | None,
    federation: Federation,
    n_public: int,
    n_submissions: int | None = None,
) -> dict:
    """The job's parameters with defaults filled in, or InvalidInput naming the first problem.

    An L1 job that names no mechanism (or names "gaussian" without σ) gets GNMax calibrated to fit a new member's
    share of the default limit (never the chosen silos' remaining budgets: see :func:`_budget_views`);
    ``n_submissions`` (default: the federation's members) sets the most votes a query holds, which σ follows."""
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidInput(
            'Give the parameters as a JSON object, e.g. {"partitions": 2, "query_fraction": 0.1}.'
        )
    algorithm = job_kind_get(kind)
    given = algorithm.level_defaults(
        dict(parameters or {}),
        privacy_level=privacy_level,
        evaluation_class_counts=(
            _evaluation_class_counts(federation) if privacy_level == PrivacyLevel.L0 else []
        ),
    )
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
    from workers.algorithms.schema import (
        names_query,
        query_defaults,
        query_rows,
        query_within,
        with_query_count,
    )

    query_given = names_query(given)
    defaults = federation.default_parameters or {}
    federation_query = query_defaults(defaults, keys=algorithm.keys)
    try:
        validated = algorithm.validate(given if query_given else {**federation_query, **given})
    except ValueError as error:
        raise InvalidInput(f"The {kind} parameters are not valid: {error}") from error
    refusal = algorithm.noise_refusal(validated)
    if privacy_level == PrivacyLevel.L1 and refusal:
        raise InvalidInput(refusal)
    try:
        given_privacy = privacy_given(given.get("privacy"))
    except ValueError as error:
        raise _invalid(error) from error
    if privacy_level == PrivacyLevel.L1:
        _unit_accepted(given_privacy, federation=federation, algorithm=algorithm, kind=kind)
    plan = None
    if (
        privacy_level == PrivacyLevel.L1
    ):  # only kinds that accept noise get here (refused above otherwise)
        plan = _l1_plan(
            kind=kind,
            validated=validated,
            given_privacy=given_privacy,
            federation=federation,
            n_queries=query_rows(validated, n_public=n_public),
            query_named=query_given,
            most_votes=_most_votes(
                kind=kind, validated=validated, federation=federation, n_submissions=n_submissions
            ),
        )
        if plan.n_queries < query_rows(validated, n_public=n_public):
            validated = with_query_count(validated, plan.n_queries)
    try:
        query_within(validated, n_public=n_public)
    except ValueError as error:
        raise _invalid(error) from error
    validated.pop("privacy", None)
    if plan is not None:
        validated["privacy"] = plan.privacy.as_dict()
    return validated


def job_workload_check(
    *, kind: str, parameters: dict, n_public: int, n_classes: int, n_member_models: int
) -> float:
    """Refuse settings that cannot train a model or exceed ``ONEFOLD_JOB_MAX_WORK``; the estimated work otherwise."""
    from workers.algorithms.schema import too_few_training_rows

    estimate = job_kind_get(kind).estimate(
        parameters, n_public=n_public, n_member_models=n_member_models
    )
    refusal = too_few_training_rows(estimate.training_rows, n_classes=n_classes)
    if refusal:
        raise InvalidInput(refusal)
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


def job_learns_from_evaluation(
    *, kind: str, federation: Federation, privacy_level: str, parameters: Mapping | None
) -> bool:
    """Whether a job of ``kind`` with these (unvalidated) ``parameters`` at ``privacy_level`` may learn from the
    fit half of the federation's evaluation split, the operator's own rows (the kind's ``reads_evaluation`` of the
    settings it would store; False where they do not validate)."""
    algorithm = job_kind_get(kind)
    try:
        settings = algorithm.validate(
            algorithm.level_defaults(
                dict(parameters or {}),
                privacy_level=privacy_level,
                evaluation_class_counts=_evaluation_class_counts(federation),
            )
        )
    except ValueError:
        return False
    return algorithm.reads_evaluation(settings)
