"""Who is working on a job: the worker's identity, the code it runs, and the heartbeat thread that renews the job's
lease while a step runs (market.jobs.leases writes the lease; the reaper re-queues a job whose lease expired)."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from market.jobs.leases import job_lease_renew


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
                job_lease_renew(job_id=job_id, chunk_id=chunk_id, worker=worker_id())
        finally:
            connection.close()  # Django opened this thread its own connection: close it, or each step leaks one

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
