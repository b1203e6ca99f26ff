"""The reaper: jobs whose worker vanished are re-queued, or failed after their last attempt, with the budget
settled by the rule (refunded before the release step, charged after: issue 45)."""

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.utils import timezone

from market.jobs.models import Job, JobChunk, JobOutbox, JobStatus
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from workers.runner import job_reap

L1_SMALL = {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}


def running_job(operator, federation, *, attempts: int, **payload) -> Job:
    body = (
        api_client_for(operator)
        .post(
            f"/api/federations/{federation.slug}/jobs/",
            {"kind": "fedkt", "privacy_level": "L0", **payload},
            format="json",
        )
        .json()
    )
    Job.objects.filter(id=body["id"]).update(
        status=JobStatus.RUNNING,
        attempts=attempts,
        worker="gone:1",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        heartbeat_at=timezone.now() - timedelta(seconds=10),
    )
    return Job.objects.get(id=body["id"])


def test_an_expired_lease_is_requeued_with_its_running_chunks_handed_back(
    operator, fedkt_submissions, settings
):
    job = running_job(operator, fedkt_submissions[0].federation, attempts=1)
    chunk = JobChunk.objects.create(
        job=job,
        index=0,
        submission_ids=[fedkt_submissions[0].id],
        status="running",
        worker="gone:1",
        lease_expires_at=timezone.now() + timedelta(hours=1),
    )
    assert job_reap() == {"requeued": 1, "failed": 0, "cancelled": 0, "republished": 0}
    job.refresh_from_db()
    chunk.refresh_from_db()
    assert (job.status, job.worker, job.lease_expires_at) == (JobStatus.QUEUED, "", None)
    assert (chunk.status, chunk.worker) == ("pending", "")
    assert JobOutbox.objects.filter(job=job).count() == 2
    assert "re-queued" in job.log_entries.last().message
    assert job_reap() == {"requeued": 0, "failed": 0, "cancelled": 0, "republished": 0}


def test_a_live_lease_is_left_alone(operator, fedkt_submissions):
    job = running_job(operator, fedkt_submissions[0].federation, attempts=1)
    Job.objects.filter(id=job.id).update(lease_expires_at=timezone.now() + timedelta(seconds=60))
    assert job_reap() == {"requeued": 0, "failed": 0, "cancelled": 0, "republished": 0}
    assert Job.objects.get(id=job.id).status == JobStatus.RUNNING


def test_after_the_last_attempt_the_job_fails_and_its_reservation_is_released(
    operator, fedkt_submissions, settings
):
    from market.budgets.models import PrivacyBudget

    settings.ONEFOLD_JOB_MAX_ATTEMPTS = 2
    job = running_job(
        operator,
        fedkt_submissions[0].federation,
        attempts=2,
        privacy_level="L1",
        parameters=L1_SMALL,
    )
    assert all(budget.reserved > 0 for budget in PrivacyBudget.objects.all())
    assert job_reap()["failed"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.failure_reason.startswith("The worker running this job stopped sending heartbeats")
    assert all(
        (budget.reserved, budget.spent) == (Decimal(0), Decimal(0))
        for budget in PrivacyBudget.objects.all()
    )


@pytest.mark.parametrize("released", [False, True], ids=["before-release", "after-release"])
def test_a_job_the_reaper_fails_after_its_noise_is_charged_only_once_it_released_something(
    operator, fedkt_submissions, settings, media_root, released
):
    """Issue 45: noise drawn but nothing released (the worker died while fusing) refunds every silo, deletes the
    noisy answers and says so on each ledger line; past the release step the charge stands."""
    from django.core.files.storage import default_storage

    from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
    from market.storage import arrays_to_npz, artifact_save

    settings.ONEFOLD_JOB_MAX_ATTEMPTS = 1
    job = running_job(
        operator,
        fedkt_submissions[0].federation,
        attempts=1,
        privacy_level="L1",
        parameters=L1_SMALL,
    )
    noisy = artifact_save(
        name=f"jobs/{job.id}/noisy-answers.npz",
        data=arrays_to_npz(noisy_counts=np.zeros((2, 2))),
        stored_names=[],
    )
    Job.objects.filter(id=job.id).update(
        noise_drawn_at=timezone.now(),
        noisy_answers_name=noisy,
        released_at=timezone.now() if released else None,
    )
    assert job_reap()["failed"] == 1
    bound = Decimal(str(round(job.privacy_bound["epsilon"], 6)))
    budgets = list(PrivacyBudget.objects.all())
    assert all(budget.reserved == 0 for budget in budgets)
    expected = bound if released else Decimal(0)
    assert all(abs(budget.spent - expected) < Decimal("0.00001") for budget in budgets)
    closing = BudgetEntry.objects.filter(spender_kind="job", spender_id=job.id).exclude(
        kind=EntryKind.RESERVE
    )
    assert {line.kind for line in closing} == {EntryKind.CHARGE if released else EntryKind.RELEASE}
    assert all(line.reason.startswith("Charged" if released else "Refunded") for line in closing)
    assert default_storage.exists(noisy) == released


def test_a_running_job_whose_cancellation_was_requested_is_cancelled_when_its_worker_vanished(
    operator, fedkt_submissions
):
    job = running_job(operator, fedkt_submissions[0].federation, attempts=1)
    Job.objects.filter(id=job.id).update(cancel_requested=True)
    assert job_reap()["cancelled"] == 1
    assert Job.objects.get(id=job.id).status == JobStatus.CANCELLED


def test_a_queued_job_whose_start_no_worker_took_is_published_again(
    operator, fedkt_submissions, settings
):
    settings.ONEFOLD_JOB_REPUBLISH_SECONDS = 60
    federation = fedkt_submissions[0].federation
    job_id = (
        api_client_for(operator)
        .post(
            f"/api/federations/{federation.slug}/jobs/",
            {"kind": "fedkt", "privacy_level": "L0"},
            format="json",
        )
        .json()["id"]
    )
    JobOutbox.objects.filter(job_id=job_id).update(
        published_at=timezone.now() - timedelta(seconds=30)
    )
    assert job_reap()["republished"] == 0
    JobOutbox.objects.filter(job_id=job_id).update(
        published_at=timezone.now() - timedelta(seconds=90)
    )
    assert job_reap()["republished"] == 1
    assert JobOutbox.objects.filter(job_id=job_id).count() == 2
    assert job_reap()["republished"] == 0  # the new row waits for its own publication
