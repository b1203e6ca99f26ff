"""What an L1 job costs each silo's privacy budget, and its quote and calibration: reads only, nothing is reserved.

The job's kind prices it (:class:`workers.algorithms.registry.ServerNoisePrice`): each silo is priced for the
votes its data can move, the kind's ``votes_per_submission`` × its submissions in the job
(:func:`workers.privacy.accounting.party_vote_shifts`), at the kind's ``l1_cost``, exactly as the job will
reserve and charge it (:mod:`market.jobs.spending`). The budgets put those costs against each silo's remainder
(:mod:`market.budgets.pricing`) and never name a job.
"""

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from market.budgets.pricing import budget_calibration_views, budget_quote
from market.errors import InvalidInput
from market.federations.models import Federation
from market.jobs.parameters import job_kind_get
from market.submissions.models import Submission
from workers.privacy.accounting import party_vote_shifts
from workers.privacy.costs import BudgetView, PrivacyCost, calibrate_noise, calibrate_queries
from workers.privacy.settings import PrivacySettings


def _priced_kind(kind: str):
    """The engine of ``kind`` if it adds server noise (it then has an L1 price); InvalidInput otherwise."""
    algorithm = job_kind_get(kind)
    if not algorithm.accepts_noise:
        raise InvalidInput(
            f"Jobs of kind {kind!r} add no server noise: they run at L0 or on L2 submissions and cost no L1 budget."
        )
    return algorithm


def job_votes_per_submission(*, kind: str, parameters: Mapping | None) -> int:
    """The votes one submission moves per query of an L1 job of ``kind`` with these stored parameters."""
    try:
        return _priced_kind(kind).votes_per_submission(parameters or {})
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"The job's parameters are not valid: {error}") from error


def job_privacy_cost(
    *,
    kind: str,
    parameters: Mapping | None,
    privacy: Mapping | None = None,
    vote_shift: int | None = None,
) -> PrivacyCost:
    """The data-independent cost of an L1 job of ``kind`` to a silo whose data moves ``vote_shift`` votes per
    query (default one submission's), as the kind prices it; ``privacy``: the job's privacy parameters (default
    ``parameters["privacy"]``) or its report (the same keys). InvalidInput naming what is wrong."""
    parameters = parameters or {}
    try:
        with np.errstate(over="ignore"):
            cost = _priced_kind(kind).l1_cost(
                parameters,
                privacy=parameters.get("privacy") or {} if privacy is None else privacy,
                vote_shift=vote_shift,
            )
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The job's privacy parameters are not valid: {error}") from error
    if not math.isfinite(cost.report.epsilon) or not all(map(math.isfinite, cost.rdp or ())):
        raise InvalidInput(
            "With so little noise and so many queries these parameters give no privacy at all "
            "(ε is unbounded); add noise or query fewer public rows."
        )
    return cost


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


def silo_vote_shifts(*, organisations, votes_per_submission: int) -> dict[int, int]:
    """Votes each silo moves per query: ``organisations`` names the silo (row or id) of each submission the job
    uses, so a silo listed k times moves k × ``votes_per_submission`` votes."""
    try:
        return party_vote_shifts(
            [getattr(organisation, "id", organisation) for organisation in organisations],
            votes_per_submission=votes_per_submission,
        )
    except ValueError as error:
        raise InvalidInput(f"The job's parameters are not valid: {error}") from error


def budget_price_job(
    *, federation: Federation, organisations, kind: str, parameters: Mapping
) -> dict:
    """A quote for an L1 job of ``kind`` with these parameters (``parameters["privacy"]``: its noise): per silo,
    the ε it would need on top of its budget and whether it fits. Reserves nothing.

    ``organisations``: the Organisation (row or id) of each submission the job would use; a silo listed k times
    is priced for moving k times the votes of one submission (:func:`job_votes_per_submission`).
    Returns ``{"cost": the report for a silo with one submission (not the most
    exposed silo's: that would tell anyone who sees the quote how many submissions some silo holds), "fits": bool,
    "silos": [{organisation_id, organisation, budget_id, submissions, ...}]}``, each silo's line as
    :func:`market.budgets.pricing.budget_quote` writes it with the number of its submissions in the job.
    """
    per_submission = job_votes_per_submission(kind=kind, parameters=parameters)
    shifts = silo_vote_shifts(organisations=organisations, votes_per_submission=per_submission)
    costs = {
        organisation_id: job_privacy_cost(kind=kind, parameters=parameters, vote_shift=shift)
        for organisation_id, shift in shifts.items()
    }
    silos = [
        {  # "submissions" after the silo's name and budget, as the quote has always listed it
            **{name: line[name] for name in ("organisation_id", "organisation", "budget_id")},
            "submissions": shifts[line["organisation_id"]] // per_submission,
            **line,
        }
        for line in budget_quote(federation=federation, costs=costs)
    ]
    one_submission = job_privacy_cost(kind=kind, parameters=parameters)
    return {
        "cost": one_submission.report.as_dict(),
        "fits": all(silo["fits"] for silo in silos),
        "silos": silos,
    }


def member_budget_views(
    *, federation: Federation, organisations, kind: str, parameters: Mapping
) -> list[BudgetView]:
    """Each listed silo's remaining budget as a calibration fits into it, with the votes its submissions move in an
    L1 job of ``kind`` (``organisations`` as for :func:`budget_price_job`)."""
    shifts = silo_vote_shifts(
        organisations=organisations,
        votes_per_submission=job_votes_per_submission(kind=kind, parameters=parameters),
    )
    return budget_calibration_views(federation=federation, vote_shifts=shifts)


def budget_calibrate(
    *, federation: Federation, organisations, kind: str, parameters: Mapping, solve_for: str
) -> dict:
    """What fits every listed silo's remaining budget in an L1 job of ``kind`` (``organisations`` and
    ``parameters`` as for :func:`budget_price_job`): the least noise (``solve_for="noise"``: largest γ or
    smallest σ at the given n_queries) or the most queries (``solve_for="queries"`` at the given γ or σ)."""
    algorithm = _priced_kind(kind)
    views = member_budget_views(
        federation=federation, organisations=organisations, kind=kind, parameters=parameters
    )

    def price(at: PrivacySettings, vote_shift: int | None) -> PrivacyCost:
        return algorithm.l1_cost(parameters, privacy=at, vote_shift=vote_shift)

    try:
        privacy = PrivacySettings.of(parameters.get("privacy") or {})
        if solve_for == "noise":
            value = calibrate_noise(views, privacy=privacy, price=price)
            # the solved noise replaces the other mechanism's parameter too (one of γ and σ is None)
            parameter = "gamma" if privacy.mechanism == "laplace" else "sigma"
            solved = (
                replace(privacy, **{"gamma": None, "sigma": None, parameter: value}).as_dict()
                if value
                else None
            )
        elif solve_for == "queries":
            value = calibrate_queries(views, privacy=privacy, price=price)
            parameter, solved = "n_queries", replace(privacy, n_queries=value).as_dict()
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
            kind=kind,
            parameters={**parameters, "privacy": solved},
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
