"""The periodic reaper (Celery beat): jobs whose lease expired are re-queued, failed after their last attempt,
or cancelled if that was asked (:func:`market.jobs.lifecycle.job_lease_expired_settle` decides and writes); queued
jobs whose start message no worker took for ``ONEFOLD_JOB_REPUBLISH_SECONDS`` (a broker that lost it) are
published again. A duplicate start is harmless: only one worker can claim the job row. Unpublished outbox rows are
swept by their own beat task (:func:`market.outbox.outbox_sweep`)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from market.jobs.lifecycle import job_lease_expired_settle, job_start_republish
from market.jobs.selectors import jobs_lease_expired, jobs_start_lost


def job_reap() -> dict:
    """Re-queue running jobs whose lease expired, or fail them after too many attempts; republish lost starts."""
    counts = {"requeued": 0, "failed": 0, "cancelled": 0}
    for job in jobs_lease_expired(now=timezone.now()):
        outcome = job_lease_expired_settle(job=job)
        if outcome:
            counts[outcome] += 1
    counts["republished"] = _republish_stale()
    return counts


def _republish_stale() -> int:
    republished = 0
    for job in jobs_start_lost(older_than_seconds=settings.ONEFOLD_JOB_REPUBLISH_SECONDS):
        job_start_republish(job=job)
        republished += 1
    return republished
