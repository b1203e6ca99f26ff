"""Pricing and calibration of L1 jobs against silos' budgets: reads only, nothing is reserved.

Each silo is priced for the votes its data can move: s × its submissions in the job
(:func:`workers.privacy.accounting.party_vote_shifts`), exactly as the job will reserve and charge it;
a weighted vote multiplies that by its largest integer weight (``vote_weight``, :func:`job_vote_weight`).
"""

import math

import numpy as np

from market.budgets.ledger import LedgerState, budget_amounts, budgets_ensure, ledger_state
from market.budgets.models import PrivacyBudget
from market.errors import InvalidInput
from market.federations.models import Federation
from market.submissions.models import Submission
from workers.privacy.accounting import party_vote_shifts
from workers.privacy.costs import (
    BudgetView,
    PrivacyCost,
    calibrate_noise,
    calibrate_queries,
    fedkt_l1_cost_from_parameters,
)


def job_privacy_cost(
    *, privacy_parameters: dict, partitions: int, teachers: int = 1, vote_shift: int | None = None
) -> PrivacyCost:
    """The data-independent cost of an L1 FedKT job to a silo whose data moves ``vote_shift`` votes per query
    (default s: one submission), or InvalidInput naming what is wrong."""
    try:
        with np.errstate(over="ignore"):
            cost = fedkt_l1_cost_from_parameters(
                privacy_parameters, partitions=partitions, teachers=teachers, vote_shift=vote_shift
            )
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The job's privacy parameters are not valid: {error}") from error
    if not math.isfinite(cost.report.epsilon) or not all(map(math.isfinite, cost.rdp)):
        raise InvalidInput(
            "With so little noise and so many queries these parameters give no privacy at all "
            "(ε is unbounded); add noise or query fewer public rows."
        )
    return cost


def job_vote_weight(*, kind: str, parameters: dict | None) -> int:
    """The largest integer weight a submission's votes carry in a job of ``kind`` with these stored parameters
    (1 for unweighted votes); the engine owns the vote rule (FedKT's ``vote``)."""
    import workers.algorithms  # noqa: F401  (registers every job kind)
    from workers.algorithms.registry import ALGORITHMS

    weight = getattr(ALGORITHMS.get(kind), "vote_weight", None)
    return weight(parameters or {}) if weight else 1


def _views(*, federation: Federation, organisation_ids) -> list[tuple[PrivacyBudget, LedgerState]]:
    budgets_ensure(federation=federation, organisation_ids=organisation_ids)
    budgets = (
        PrivacyBudget.objects.select_related("organisation")
        .filter(federation=federation, organisation_id__in=list(organisation_ids))
        .order_by("id")
    )
    found = [(budget, ledger_state(budget)) for budget in budgets]
    if len(found) != len(set(organisation_ids)):
        raise InvalidInput(f"Every silo priced must be a member of '{federation.slug}'.")
    return found


def submission_silos(
    *, federation: Federation, submission_ids, organisation_id: int | None = None
) -> list[int]:
    """The organisation id of each listed submission of the federation (one entry per submission), to price a job
    that would use them; InvalidInput naming a submission that is not the federation's. With ``organisation_id``
    (a non-operator asking) only that organisation's submissions count: another's is "not the federation's" too,
    so that the answer does not tell which submission ids exist."""
    submissions = Submission.objects.filter(federation=federation, id__in=list(submission_ids))
    if organisation_id is not None:
        submissions = submissions.filter(organisation_id=organisation_id)
    found = dict(submissions.values_list("id", "organisation_id"))
    missing = [str(submission_id) for submission_id in submission_ids if submission_id not in found]
    if missing:
        raise InvalidInput(
            f"Submission(s) #{', #'.join(missing)} do not belong to '{federation.slug}'."
        )
    return [found[submission_id] for submission_id in dict.fromkeys(submission_ids)]


def silo_vote_shifts(*, organisations, partitions: int, vote_weight: int = 1) -> dict[int, int]:
    """Votes each silo moves per query: ``organisations`` names the silo (row or id) of each submission the job
    uses, so a silo listed k times moves k·s votes (k·s·W with votes weighted up to ``vote_weight`` W)."""
    try:
        return party_vote_shifts(
            [getattr(organisation, "id", organisation) for organisation in organisations],
            votes_per_submission=partitions * vote_weight,
        )
    except ValueError as error:
        raise InvalidInput(f"The job's parameters are not valid: {error}") from error


def budget_price_job(
    *,
    federation: Federation,
    organisations,
    privacy_parameters: dict,
    partitions: int,
    teachers: int = 1,
    vote_weight: int = 1,
) -> dict:
    """A quote for an L1 job: per silo, the ε it would need on top of its budget and whether it fits. Reserves nothing.

    ``organisations``: the Organisation (row or id) of each submission the job would use; a silo listed k times
    is priced for moving k·s votes (k·s·W for votes weighted up to ``vote_weight`` W).
    Returns ``{"cost": the report for a silo with one submission (not the most
    exposed silo's: that would tell anyone who sees the quote how many submissions some silo holds), "fits": bool, "silos": [{organisation_id, organisation, budget_id, submissions, vote_shift, epsilon (its
    own cost on its own), epsilon_limit, spent, reserved, remaining, needed, remaining_after, fits,
    composition_rule}]}``, amounts as decimal strings.
    """
    shifts = silo_vote_shifts(
        organisations=organisations, partitions=partitions, vote_weight=vote_weight
    )
    costs = {
        organisation_id: job_privacy_cost(
            privacy_parameters=privacy_parameters,
            partitions=partitions,
            teachers=teachers,
            vote_shift=shift,
        )
        for organisation_id, shift in shifts.items()
    }
    silos = []
    for budget, state in _views(federation=federation, organisation_ids=sorted(shifts)):
        cost = costs[budget.organisation_id]
        amounts = budget_amounts(
            budget=budget,
            charged=state.charged,
            reserved=[*(c for c, _ in state.open_reservations.values()), cost],
        )
        needed = amounts.committed - budget.spent - budget.reserved
        silos.append(
            {
                "organisation_id": budget.organisation_id,
                "organisation": budget.organisation.name,
                "budget_id": budget.id,
                "submissions": shifts[budget.organisation_id] // (partitions * vote_weight),
                "vote_shift": cost.report.vote_shift,
                "epsilon": cost.report.epsilon,
                "epsilon_limit": str(budget.epsilon_limit),
                "spent": str(budget.spent),
                "reserved": str(budget.reserved),
                "remaining": str(budget.remaining),
                "needed": str(needed),
                "remaining_after": str(budget.remaining - needed),
                "fits": amounts.committed <= budget.epsilon_limit,
                "composition_rule": amounts.rule,
            }
        )
    one_submission = job_privacy_cost(
        privacy_parameters=privacy_parameters,
        partitions=partitions,
        teachers=teachers,
        vote_shift=partitions * vote_weight,
    )
    return {
        "cost": one_submission.report.as_dict(),
        "fits": all(silo["fits"] for silo in silos),
        "silos": silos,
    }


def budget_calibrate(
    *,
    federation: Federation,
    organisations,
    privacy_parameters: dict,
    partitions: int,
    solve_for: str,
    teachers: int = 1,
    vote_weight: int = 1,
) -> dict:
    """What fits every listed silo's remaining budget (``organisations`` as for :func:`budget_price_job`): the least noise (``solve_for="noise"``: largest γ or
    smallest σ at the given n_queries) or the most queries (``solve_for="queries"`` at the given γ or σ)."""
    shifts = silo_vote_shifts(
        organisations=organisations, partitions=partitions, vote_weight=vote_weight
    )
    views = [
        BudgetView(
            epsilon_limit=float(budget.epsilon_limit),
            delta=float(budget.delta),
            committed=tuple(state.committed()),
            vote_shift=shifts[budget.organisation_id],
        )
        for budget, state in _views(federation=federation, organisation_ids=sorted(shifts))
    ]
    mechanism, delta = privacy_parameters.get("mechanism"), privacy_parameters.get("delta")
    try:
        if solve_for == "noise":
            value = calibrate_noise(
                views,
                mechanism=mechanism,
                delta=delta,
                n_queries=privacy_parameters["n_queries"],
                partitions=partitions,
                teachers=teachers,
            )
            parameter = "gamma" if mechanism == "laplace" else "sigma"
            solved = (
                {**privacy_parameters, "gamma": None, "sigma": None, parameter: value}
                if value
                else None
            )
        elif solve_for == "queries":
            value = calibrate_queries(
                views,
                mechanism=mechanism,
                gamma=privacy_parameters.get("gamma"),
                sigma=privacy_parameters.get("sigma"),
                delta=delta,
                partitions=partitions,
                teachers=teachers,
            )
            parameter, solved = "n_queries", {**privacy_parameters, "n_queries": value}
        else:
            raise InvalidInput(
                "Calibrate for 'noise' (the least noise that fits) or 'queries' (the most queries)."
            )
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The privacy parameters are not valid: {error}") from error
    price = (
        budget_price_job(
            federation=federation,
            organisations=organisations,
            privacy_parameters=solved,
            partitions=partitions,
            teachers=teachers,
            vote_weight=vote_weight,
        )
        if solved
        else None
    )
    return {
        "solve_for": solve_for,
        "parameter": parameter,
        "value": value if value is None or math.isfinite(value) else None,
        "privacy": solved,
        "price": price,
    }
