"""Semi-private students under a real Celery worker (issue 40, item 1): an L1 job fitted on the operator's fit-half
rows too is charged on every silo's ledger exactly what the same job without them is charged, and says so."""

import pytest

from market.budgets.models import BudgetEntry, EntryKind
from market.jobs.models import GlobalModel, JobStatus
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, wait_for_job
from workers.algorithms.semi_private import SEMI_PRIVATE_PRIVACY_NOTE

pytestmark = pytest.mark.worker


@pytest.fixture
def fast_jobs(transactional_db, settings):
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    from workers.celery_app import app

    app.control.purge()
    return settings


def _launch(operator, submissions, parameters: dict) -> int:
    response = api_client_for(operator).post(
        f"/api/federations/{submissions[0].federation.slug}/jobs/",
        {"kind": "fedkt", "privacy_level": "L1", "parameters": parameters, "seed": 5},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _charges(job_id: int) -> dict[int, tuple]:
    return {
        entry.budget.organisation_id: (entry.epsilon, entry.delta, entry.unit, entry.mechanism)
        for entry in BudgetEntry.objects.filter(
            spender_kind="job", spender_id=job_id, kind=EntryKind.CHARGE
        ).select_related("budget")
    }


def test_a_semi_private_l1_job_is_charged_the_same_epsilon_as_the_job_without_it_and_says_why(
    fast_jobs, media_root, tmp_path, operator, fedkt_submissions
):
    parameters = {key: value for key, value in FAST_FEDKT.items() if key != "query"} | {
        "query": 20,
        "privacy": {"gamma": 0.02},
    }
    with job_worker(fast_jobs, media_root, tmp_path / "worker.log"):
        semi_id = _launch(operator, fedkt_submissions, parameters)
        off_id = _launch(operator, fedkt_submissions, {**parameters, "semi_private": "off"})
        semi, off = (wait_for_job(job_id, timeout=180) for job_id in (semi_id, off_id))
    assert (semi.status, off.status) == (JobStatus.SUCCEEDED, JobStatus.SUCCEEDED)
    assert (
        semi.parameters["semi_private"] == "cross_fitted" and "semi_private" not in off.parameters
    )
    charged, charged_off = _charges(semi.id), _charges(off.id)
    assert len(charged) == len({s.organisation_id for s in fedkt_submissions}) == len(charged_off)
    assert charged == charged_off  # the same ε, δ, unit and mechanism on every silo's ledger
    semi_model, off_model = (GlobalModel.objects.get(job=job) for job in (semi, off))
    assert (
        semi_model.privacy_report["data_independent"]
        == off_model.privacy_report["data_independent"]
    )
    assert semi_model.privacy_report["notes"] == [SEMI_PRIVATE_PRIVACY_NOTE]
    assert "notes" not in off_model.privacy_report
    epsilon = semi_model.privacy_report["data_independent"]["epsilon"]
    assert all(abs(float(value[0]) - epsilon) < 1e-5 for value in charged.values())
    messages = [entry.message for entry in semi.log_entries.all()]
    assert any(
        message.startswith("Semi-private model: fitted on")
        and "no silo pays any extra ε" in message
        for message in messages
    ), messages
    assert not any("Semi-private" in entry.message for entry in off.log_entries.all())
