"""The dry-run price of a job (budget-price API, market.jobs.pricing) is the price of the same job: its parameters
go through the kind's engine (`validate`, its defaults and ranges) and the job's own defaults, so every silo's quoted
ε is what job_create reserves for it. One test per registered job kind: a kind that adds server noise is quoted and
then created, and the two compared; any other kind is refused by both, with the same sentence."""

from decimal import Decimal

import pytest

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.jobs.models import Job
from market.jobs.parameters import job_kind_choices
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT

KINDS = [name for name, _ in job_kind_choices()]


def _kind(name: str):
    from market.jobs.parameters import job_kind_get

    return job_kind_get(name)


#: The parameters each kind is priced and launched with (the kind's engine fills in everything else).
PARAMETERS = {"fedkt": {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}}


def _quote(client, federation, *, kind, parameters, submissions):
    return client.post(
        f"/api/federations/{federation.slug}/budget-price/",
        {"kind": kind, "parameters": parameters, "submissions": [s.id for s in submissions]},
        format="json",
    )


def _launch(client, federation, *, kind, parameters, submissions):
    return client.post(
        f"/api/federations/{federation.slug}/jobs/",
        {
            "kind": kind,
            "privacy_level": "L1",
            "seed": 7,
            "parameters": parameters,
            "submissions": [s.id for s in submissions],
        },
        format="json",
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", KINDS)
def test_the_dry_run_price_of_a_job_is_what_the_same_job_reserves(
    kind, operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    client = api_client_for(operator)
    parameters = PARAMETERS.get(kind, {})
    quote = _quote(
        client, federation, kind=kind, parameters=parameters, submissions=fedkt_submissions
    )
    launched = _launch(
        client, federation, kind=kind, parameters=parameters, submissions=fedkt_submissions
    )
    if not _kind(kind).accepts_noise:
        assert quote.status_code == 400 and launched.status_code == 400
        assert quote.json()["detail"] == launched.json()["detail"]
        assert quote.json()["detail"].startswith("Server noise (L1) is only available for")
        assert not Job.objects.exists() and not BudgetEntry.objects.exists()
        return
    assert quote.status_code == 200, quote.json()
    assert launched.status_code == 201, launched.json()
    job = Job.objects.get(id=launched.json()["id"])
    reserved = {
        entry.budget.organisation_id: entry.epsilon
        for entry in BudgetEntry.objects.filter(
            spender_kind="job", spender_id=job.id, kind=EntryKind.RESERVE
        ).select_related("budget")
    }
    quoted = {silo["organisation_id"]: Decimal(silo["needed"]) for silo in quote.json()["silos"]}
    assert reserved == quoted and len(reserved) == 3
    assert all(epsilon > 0 for epsilon in reserved.values())
    assert quote.json()["cost"] == {
        key: value for key, value in job.privacy_bound.items() if key in quote.json()["cost"]
    }


@pytest.mark.django_db
def test_the_dry_run_takes_the_engines_defaults_and_ranges_not_its_own(operator, fedkt_submissions):
    """FedKT's engine allows at most 64 partitions, defaults to 2 and leaves t to what the submissions declared (the
    price API's own schema allowed 10,000 and stored t = 1): the price says the same."""
    federation = fedkt_submissions[0].federation
    client = api_client_for(operator)
    too_many = client.post(
        f"/api/federations/{federation.slug}/budget-price/",
        {"privacy": {"mechanism": "laplace", "gamma": 0.04, "n_queries": 100}, "partitions": 65},
        format="json",
    )
    assert too_many.status_code == 400 and "partitions" in too_many.json()["detail"]
    from market.jobs.pricing import job_parameters_priced

    priced = job_parameters_priced(
        federation=federation,
        kind="fedkt",
        parameters={},
        privacy={"mechanism": "laplace", "gamma": 0.04, "n_queries": 100},
        organisations=[s.organisation_id for s in fedkt_submissions],
    )
    assert (priced["partitions"], priced["query_count"], priced["privacy"]["n_queries"]) == (
        2,
        100,
        100,
    )
    assert "teachers" not in priced
    assert not BudgetEntry.objects.exists() and all(
        budget.reserved == 0 for budget in PrivacyBudget.objects.all()
    )
