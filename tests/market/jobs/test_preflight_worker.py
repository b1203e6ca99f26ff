"""A pre-flight estimate run by a real Celery worker process on the real broker and PostgreSQL: queued through the
outbox on commit, claimed by the worker, its progress readable while it runs, its scores stored, nothing charged."""

import pytest

from market.budgets.models import BudgetEntry
from market.jobs.models import EstimateStatus, Job, JobEstimate
from tests.conftest import api_client_for, wait_until
from tests.fixtures.jobs import FAST_FEDKT

pytestmark = pytest.mark.worker


def test_a_worker_computes_an_l1_estimate_and_the_api_shows_its_progress_and_scores(
    transactional_db, operator, fedkt_submissions, celery_worker
):
    # The worker starts after the submissions are validated here, so that it does not race their validation.
    client = api_client_for(operator)
    request = {
        "kind": "fedkt",
        "privacy_level": "L1",
        "parameters": {**FAST_FEDKT, "privacy": {"mechanism": "laplace", "gamma": 0.5}},
        "seed": 11,
        "draws": 2,
    }
    created = client.post(
        f"/api/federations/{fedkt_submissions[0].federation.slug}/job-estimates/",
        request,
        format="json",
    )
    assert created.status_code == 202, created.json()
    estimate_id = created.json()["id"]
    seen = []

    def ended() -> bool:
        body = client.get(f"/api/job-estimates/{estimate_id}/").json()
        seen.append(body["progress"]["percent"])
        return body["status"] in (EstimateStatus.SUCCEEDED, EstimateStatus.FAILED)

    wait_until(
        ended,
        timeout=300,
        interval=0.5,
        message="the worker did not finish the estimate in time",
        progress=lambda: seen[-1:],
    )

    estimate = JobEstimate.objects.get(id=estimate_id)
    assert estimate.status == EstimateStatus.SUCCEEDED, estimate.failure_reason
    assert estimate.worker.endswith(f":{celery_worker.pid}")
    assert estimate.attempts == 1
    assert seen == sorted(seen) and seen[-1] == 100  # progress only moves forward
    assert len(estimate.result["draws"]) == 2 and estimate.result["reference"] is not None
    body = client.get(f"/api/job-estimates/{estimate_id}/").json()
    assert body["statements"]["passes_gate"] in (True, False)
    # the same request while the estimate stands reads it, and starts nothing
    again = client.post(
        f"/api/federations/{fedkt_submissions[0].federation.slug}/job-estimates/",
        request,
        format="json",
    )
    assert (again.status_code, again.json()["id"]) == (200, estimate_id)
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()
