"""The periodic reaper (Celery beat): jobs whose lease expired are re-queued, failed after their last attempt,
or cancelled if that was asked; queued jobs whose start message no worker took for
``ONEFOLD_JOB_REPUBLISH_SECONDS`` (a broker that lost it) are published again. A duplicate start is harmless:
only one worker can claim the job row. Unpublished outbox rows are swept by their own beat task
(:func:`market.outbox.outbox_sweep`)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.jobs.models import ChunkStatus, Job, JobChunk, JobStatus
from market.jobs.services import job_enqueue, job_log
from market.outbox import outbox_published_long_ago
from workers.runner.lifecycle import job_end


def job_reap() -> dict:
    """Re-queue running jobs whose lease expired, or fail them after too many attempts; republish lost starts."""
    now = timezone.now()
    counts = {"requeued": 0, "failed": 0, "cancelled": 0}
    for job in Job.objects.filter(status=JobStatus.RUNNING, lease_expires_at__lt=now):
        if job.cancel_requested:
            counts["cancelled"] += job_end(job_id=job.id, status=JobStatus.CANCELLED)
        elif job.attempts >= settings.ONEFOLD_JOB_MAX_ATTEMPTS:
            counts["failed"] += job_end(
                job_id=job.id,
                status=JobStatus.FAILED,
                reason=(
                    f"The worker running this job stopped sending heartbeats (last at {_when(job.heartbeat_at)}) on "
                    f"attempt {job.attempts} of {job.attempts}; it was not retried again."
                ),
            )
        else:
            counts["requeued"] += _requeue(job)
    counts["republished"] = _republish_stale()
    return counts


def _republish_stale() -> int:
    stale = outbox_published_long_ago(
        Job.objects.filter(status=JobStatus.QUEUED, cancel_requested=False),
        older_than_seconds=settings.ONEFOLD_JOB_REPUBLISH_SECONDS,
    )
    republished = 0
    for job in stale:
        with transaction.atomic():
            job_log(
                job_id=job.id,
                level="warning",
                message="No worker took this job's start message; published it again.",
            )
            job_enqueue(job=job)
        republished += 1
    return republished


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "never"


def _requeue(job: Job) -> bool:
    with transaction.atomic():
        # Only while the lease is the expired one read above: a worker whose heartbeat renewed it meanwhile keeps
        # the job.
        requeued = Job.objects.filter(
            id=job.id, status=JobStatus.RUNNING, lease_expires_at=job.lease_expires_at
        ).update(
            status=JobStatus.QUEUED,
            phase="",
            worker="",
            lease_expires_at=None,
            progress_stage="waiting for a worker",
        )
        if not requeued:
            return False
        # The dead worker's running chunks go back; done chunks stay done, so the next claim predicts the rest.
        JobChunk.objects.filter(job=job, status=ChunkStatus.RUNNING).update(
            status=ChunkStatus.PENDING, worker="", lease_expires_at=None
        )
        job_log(
            job_id=job.id,
            level="warning",
            message=f"No heartbeat from worker {job.worker or 'unknown'} since "
            f"{_when(job.heartbeat_at)}; re-queued.",
        )
        job_enqueue(job=job)
    return True
