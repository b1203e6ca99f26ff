"""A record-level L1 job under a real Celery worker (issue 40, item 2): every student of every silo votes, the job
is charged on each silo's ledger once, example-level, at the ε dp-accounting computes for sensitivity √2, and its
global model's card report says the unit and δ."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant

from market.budgets.models import BudgetEntry, EntryKind
from market.jobs.models import GlobalModel, JobStatus
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, wait_for_job

pytestmark = pytest.mark.worker

SIGMA, N_QUERIES, DELTA = 6.0, 20, 1e-5


@pytest.fixture
def fast_jobs(transactional_db, settings):
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    from workers.celery_app import app

    app.control.purge()
    return settings


def test_a_record_level_l1_job_runs_on_a_real_worker_and_is_charged_example_level(
    fast_jobs, media_root, tmp_path, operator, record_submissions
):
    parameters = {key: value for key, value in FAST_FEDKT.items() if key != "query"} | {
        "query": N_QUERIES,
        "privacy": {"unit": "record", "sigma": SIGMA},
    }
    with job_worker(fast_jobs, media_root, tmp_path / "worker.log"):
        response = api_client_for(operator).post(
            f"/api/federations/{record_submissions[0].federation.slug}/jobs/",
            {"kind": "fedkt", "privacy_level": "L1", "parameters": parameters, "seed": 5},
            format="json",
        )
        assert response.status_code == 201, response.json()
        job = wait_for_job(response.json()["id"], timeout=180)
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    assert job.parameters["privacy"]["unit"] == "record"
    accountant = RdpAccountant()
    accountant.compose(
        SelfComposedDpEvent(GaussianDpEvent(noise_multiplier=SIGMA / np.sqrt(2)), N_QUERIES)
    )
    expected = accountant.get_epsilon(DELTA)
    report = GlobalModel.objects.get(job=job).privacy_report["data_independent"]
    assert (report["unit"], report["delta"], report["vote_shift"]) == ("example-level", DELTA, 1)
    assert report["epsilon"] == pytest.approx(expected, rel=1e-3)
    charges = {
        entry.budget.organisation_id: (float(entry.epsilon), entry.unit)
        for entry in BudgetEntry.objects.filter(
            spender_kind="job", spender_id=job.id, kind=EntryKind.CHARGE
        ).select_related("budget")
    }
    assert set(charges) == {submission.organisation_id for submission in record_submissions}
    for epsilon, unit in charges.values():
        assert unit == "example-level"
        assert epsilon == pytest.approx(expected, rel=1e-3)
