"""The dry-run price of an L1 job: its parameters checked and completed exactly as :func:`market.jobs.services.
job_create` checks them (the kind's engine's ``validate``, through :func:`market.jobs.parameters.
job_parameters_validate`), then priced as the budgets will reserve them. So the price a silo is quoted is the price
of the job that runs: same ranges, same defaults (FedKT's 5 teachers, at most 64 partitions), same query and noise.

Used by the budget-price and budget-calibration APIs and by the budgets dashboard's pricing form; the job launcher
validates its form with the same function before it prices.
"""

from collections.abc import Mapping

from market.errors import InvalidInput
from market.federations.models import Federation, PrivacyLevel
from market.federations.selectors import public_dataset_current
from market.jobs.parameters import job_parameters_validate
from market.jobs.privacy_costs import budget_calibrate, budget_price_job
from workers.algorithms.schema import names_query, with_query_count


def job_parameters_priced(
    *,
    federation: Federation,
    kind: str,
    parameters: Mapping | None,
    privacy: Mapping | None,
    organisations,
) -> dict:
    """The parameters an L1 job of ``kind`` with these ``parameters`` and ``privacy`` would store, as
    :func:`job_create` would store them for a job on the submissions of ``organisations`` (one silo per submission).

    ``privacy["n_queries"]``, the number of queried public rows, stands for the engine's ``query_count`` when the
    parameters name no query."""
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidInput("Give 'parameters' as a JSON object, as for a job.")
    given = dict(parameters or {})
    privacy = dict(privacy or {})
    n_queries = privacy.pop("n_queries", None)
    if n_queries is not None and not names_query(given):
        given = with_query_count(given, n_queries)
    if privacy:
        given["privacy"] = {**dict(given.get("privacy") or {}), **privacy}
    organisations = list(organisations)
    return job_parameters_validate(
        kind=kind,
        privacy_level=PrivacyLevel.L1,
        parameters=given,
        federation=federation,
        n_public=public_dataset_current(federation=federation).n_rows,
        n_submissions=len(organisations) or None,
    )


def job_price_quote(
    *,
    federation: Federation,
    kind: str,
    parameters: Mapping | None,
    privacy: Mapping | None,
    organisations,
) -> dict:
    """What an L1 job of ``kind`` would cost each silo (:func:`market.jobs.privacy_costs.budget_price_job`), its
    parameters completed as the job's would be (:func:`job_parameters_priced`). Reserves nothing."""
    organisations = list(organisations)
    return budget_price_job(
        federation=federation,
        organisations=organisations,
        kind=kind,
        parameters=job_parameters_priced(
            federation=federation,
            kind=kind,
            parameters=parameters,
            privacy=privacy,
            organisations=organisations,
        ),
    )


def job_price_calibration(
    *,
    federation: Federation,
    kind: str,
    parameters: Mapping | None,
    privacy: Mapping | None,
    organisations,
    solve_for: str,
) -> dict:
    """The least noise or the most queries that fit every listed silo (:func:`market.jobs.privacy_costs.
    budget_calibrate`) for an L1 job of ``kind`` whose other parameters are completed as the job's would be."""
    organisations = list(organisations)
    priced = job_parameters_priced(
        federation=federation,
        kind=kind,
        parameters=parameters,
        privacy=privacy,
        organisations=organisations,
    )
    # What is solved for starts from what was asked (a σ the job would calibrate itself is not the question).
    asked = dict(privacy or {})
    return budget_calibrate(
        federation=federation,
        organisations=organisations,
        kind=kind,
        parameters={**priced, "privacy": {**priced["privacy"], **asked}},
        solve_for=solve_for,
    )
