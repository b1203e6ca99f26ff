"""How long a worker holds a running job (and its chunk) before the reaper may hand it to another: the lease, and
its renewal by the worker's heartbeat (workers.runner.leases runs the heartbeat thread; this module writes the
rows). The job settings are read from market/settings.py, which writes each default once."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from market.jobs.models import ChunkStatus, Job, JobChunk, JobStatus


def lease_expiry(*, now: datetime) -> datetime:
    """When a lease taken or renewed at ``now`` expires (``ONEFOLD_JOB_LEASE_SECONDS`` later)."""
    return now + timedelta(seconds=settings.ONEFOLD_JOB_LEASE_SECONDS)


def job_lease_renew(*, job_id: int, chunk_id: int | None, worker: str) -> None:
    """Renew a running job's lease (and, with ``chunk_id``, that chunk's while ``worker`` still holds it)."""
    now = timezone.now()
    expires = lease_expiry(now=now)
    Job.objects.filter(id=job_id, status=JobStatus.RUNNING).update(
        heartbeat_at=now, lease_expires_at=expires
    )
    if chunk_id is not None:
        JobChunk.objects.filter(id=chunk_id, worker=worker, status=ChunkStatus.RUNNING).update(
            lease_expires_at=expires
        )
