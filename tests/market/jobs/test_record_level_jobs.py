"""Record-level L1 through the job pipeline (issue 40, item 2; Celery eager mode): the federation says which units
its members accept, a launch of another unit (or on submissions that do not declare disjoint partitions) is refused
with a JSON 400 sentence before anything is written, and an accepted one is charged example-level on every silo's
ledger, at the ε dp-accounting computes for sensitivity √2."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.federations.models import Federation
from market.jobs.models import GlobalModel, Job
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded

SIGMA, N_QUERIES, DELTA = 6.0, 20, 1e-5
RECORD = {**FAST_FEDKT, "query": N_QUERIES, "privacy": {"unit": "record", "sigma": SIGMA}}


def post_job(user, federation, parameters):
    return api_client_for(user).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "fedkt", "privacy_level": "L1", "seed": 4, "parameters": parameters},
        format="json",
    )


def nothing_written() -> bool:
    return not Job.objects.exists() and not BudgetEntry.objects.exists()


def test_a_unit_the_federation_does_not_accept_is_refused_with_a_sentence_and_nothing_written(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    assert federation.privacy_units == ["party"]  # the default: party-level only
    response = post_job(operator, federation, RECORD)
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"The members of '{federation.slug}' accept L1 jobs that protect the party (party-level) only, not the "
        "record (example-level); choose 'privacy.unit' 'party', or ask an operator to accept the unit for this "
        "federation."
    )
    assert nothing_written()


def test_a_bad_unit_and_undeclared_partitions_are_refused_with_a_sentence(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    response = post_job(operator, federation, {**RECORD, "privacy": {"unit": "silo"}})
    assert response.status_code == 400
    assert "'privacy.unit' must be one of 'party', 'record'" in response.json()["detail"]
    Federation.objects.filter(id=federation.id).update(privacy_units=["party", "record"])
    response = post_job(operator, federation, RECORD)
    assert response.status_code == 400
    assert "do not declare it (a record could then move several votes)" in response.json()["detail"]
    assert nothing_written()


def test_a_record_level_job_is_charged_example_level_at_the_dp_accounting_epsilon(
    eager_celery, operator, record_submissions, django_capture_on_commit_callbacks
):
    federation = record_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters=RECORD,
        seed=5,
    )
    assert body["parameters"]["privacy"] == {
        "mechanism": "gaussian",
        "gamma": None,
        "sigma": SIGMA,
        "delta": DELTA,
        "n_queries": N_QUERIES,
        "unit": "record",
    }
    job = succeeded(body)
    accountant = RdpAccountant()  # one record moves one student's vote: L2 sensitivity √2
    accountant.compose(
        SelfComposedDpEvent(GaussianDpEvent(noise_multiplier=SIGMA / np.sqrt(2)), N_QUERIES)
    )
    expected = accountant.get_epsilon(DELTA)
    report = GlobalModel.objects.get(job=job).privacy_report["data_independent"]
    assert (report["unit"], report["vote_shift"]) == ("example-level", 1)
    assert report["epsilon"] == pytest.approx(expected, rel=1e-3)
    charges = BudgetEntry.objects.filter(
        spender_kind="job", spender_id=job.id, kind=EntryKind.CHARGE
    )
    assert sorted(entry.budget.organisation_id for entry in charges) == sorted(
        submission.organisation_id for submission in record_submissions
    )
    for entry in charges:
        assert entry.unit == "example-level"
        assert float(entry.epsilon) == pytest.approx(expected, rel=1e-3)
    assert all(
        budget.entries.filter(kind=EntryKind.CHARGE).count() == 1
        for budget in PrivacyBudget.objects.filter(federation=federation)
    )
