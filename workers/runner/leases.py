"""Who is working on a job and for how long: the worker's identity, the deployment's job settings, and the
lease a heartbeat thread renews while a step runs (the reaper re-queues a job whose lease expired)."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.utils import timezone

from market.jobs.models import ChunkStatus, Job, JobChunk, JobStatus

# The job settings (leases, heartbeats, attempts, chunks) are read from market/settings.py, which writes each
# default once (from its environment variable); no call site repeats a default of its own.


def lease_seconds() -> float:
    return settings.ONEFOLD_JOB_LEASE_SECONDS


@functools.cache
def worker_id() -> str:
    """host:pid, the owner written on the rows a worker process claims: a release or a finish only touches rows
    that still name this process, so a worker that lost its lease cannot undo its successor's claim."""
    return f"{socket.gethostname()}:{os.getpid()}"


@functools.cache
def code_version() -> str:
    """The code a global model was made with, for its lineage: ONEFOLD_CODE_VERSION where the deployment sets it
    (an image has no .git; docker/.env.example), else ``git describe`` of the checkout."""
    if settings.ONEFOLD_CODE_VERSION:
        return settings.ONEFOLD_CODE_VERSION
    try:
        return (
            subprocess.run(
                ["git", "describe", "--always", "--dirty"],
                capture_output=True,
                text=True,
                timeout=10,
                cwd=Path(__file__).resolve().parents[3],
                check=True,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@contextmanager
def lease_kept(*, job_id: int, chunk_id: int | None = None):
    """Renew the job's (and the chunk's) lease every heartbeat interval while the block runs."""
    stop = threading.Event()

    def beat():
        try:
            while not stop.wait(settings.ONEFOLD_JOB_HEARTBEAT_SECONDS):
                lease_renew(job_id=job_id, chunk_id=chunk_id)
        finally:
            connection.close()  # Django opened this thread its own connection: close it, or each step leaks one

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def lease_renew(*, job_id: int, chunk_id: int | None) -> None:
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    Job.objects.filter(id=job_id, status=JobStatus.RUNNING).update(
        heartbeat_at=now, lease_expires_at=expires
    )
    if chunk_id is not None:
        JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
            lease_expires_at=expires
        )
