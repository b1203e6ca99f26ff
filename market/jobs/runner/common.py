"""What every step of a job shares: settings, the worker's identity, leases and heartbeats, ending a job."""

from __future__ import annotations

import functools
import logging
import os
import socket
import subprocess
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from market.jobs.models import ChunkStatus, Job, JobChunk, JobStatus
from market.jobs.services import job_log, job_settle_budget
from market.storage import arrays_from_npz
from market.submissions.models import Submission

logger = logging.getLogger("market.jobs.runner")
CONTRIBUTION_RULE = ("Each silo's weight is the number of public examples the global model was trained on where its "
                     "members' signal (FedKT: consistent votes) agreed with the fused label, summed over its "
                     "submissions and normalised so that the weights add up to 1 (equal weights if no member agreed).")


class JobInputError(Exception):
    """Bad input (a corrupt artifact, a deleted submission, a model that fails): the job fails at once."""


def job_setting(name: str, default: int | float):
    return getattr(settings, name, default)


def lease_seconds() -> float:
    return job_setting("ONEFOLD_JOB_LEASE_SECONDS", 120)


@functools.cache
def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@functools.cache
def code_version() -> str:
    if getattr(settings, "ONEFOLD_CODE_VERSION", ""):
        return settings.ONEFOLD_CODE_VERSION
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parents[3], check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _algorithm(kind: str):
    import workers.algorithms  # noqa: F401  (registers every job kind)
    from workers.algorithms.registry import algorithm_get

    return algorithm_get(kind)


@contextmanager
def lease_kept(*, job_id: int, chunk_id: int | None = None):
    """Renew the job's (and the chunk's) lease every heartbeat interval while the block runs."""
    stop = threading.Event()

    def beat():
        try:
            while not stop.wait(job_setting("ONEFOLD_JOB_HEARTBEAT_SECONDS", 20)):
                _renew(job_id=job_id, chunk_id=chunk_id)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _renew(*, job_id: int, chunk_id: int | None) -> None:
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    Job.objects.filter(id=job_id, status=JobStatus.RUNNING).update(heartbeat_at=now, lease_expires_at=expires)
    if chunk_id is not None:
        JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
            lease_expires_at=expires)


def _stage(job_id: int, stage: str) -> None:
    Job.objects.filter(id=job_id).update(progress_stage=stage)
    job_log(job_id=job_id, message=f"Stage: {stage}.")


def _failing_on_unexpected(step: str):
    """Unexpected errors (a bug, a time limit) fail the job with a readable reason instead of leaving it running;
    transient ones (database, broker) propagate so that the task retries with backoff."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*, job_id: int | None = None, chunk_id: int | None = None):
            from workers.tasks import TRANSIENT_ERRORS

            try:
                return function(**({"job_id": job_id} if chunk_id is None else {"chunk_id": chunk_id}))
            except (TRANSIENT_ERRORS + (_Superseded,)):
                raise
            except Exception as error:
                logger.exception("Job step %s failed", step)
                owner = job_id if chunk_id is None else JobChunk.objects.filter(id=chunk_id).values_list(
                    "job_id", flat=True).first()
                if owner is not None:
                    job_end(job_id=owner, status=JobStatus.FAILED,
                            reason=f"Internal error while {step}: {type(error).__name__}: {error}")
        return wrapper
    return decorate


# --- ending a job -------------------------------------------------------------------------------------------

def _delete_artifacts(job: Job) -> None:
    from django.core.files.storage import default_storage

    for name in JobChunk.objects.filter(job=job).exclude(artifact_name="").values_list("artifact_name", flat=True):
        default_storage.delete(name)


def job_end(*, job_id: int, status: str, reason: str = "") -> bool:
    """Move a running (or queued) job to failed or cancelled, settling its budget; False if it had already ended."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(id=job_id,
                                                     status__in=[JobStatus.RUNNING, JobStatus.QUEUED]).first()
        if job is None:
            return False
        job.status, job.failure_reason, job.finished_at = status, reason, timezone.now()
        job.worker, job.lease_expires_at, job.phase = "", None, ""
        job.save(update_fields=["status", "failure_reason", "finished_at", "worker", "lease_expires_at", "phase"])
        job_settle_budget(job=job)
        job_log(job_id=job.id, level="error" if status == JobStatus.FAILED else "info",
                message=f"Failed: {reason}" if status == JobStatus.FAILED else "Cancelled; no global model was made.")
    _delete_artifacts(job)
    return True


def _stop_if_cancelled(job_id: int) -> bool:
    if Job.objects.filter(id=job_id, cancel_requested=True).exists():
        job_end(job_id=job_id, status=JobStatus.CANCELLED)
        return True
    return False


class _Superseded(Exception):
    """The job was cancelled or handed to another worker while this one fused; its result is dropped."""


def _members(submissions: list[Submission]):
    from workers.algorithms.registry import Member

    return [Member(key=str(submission.id), organisation=str(submission.organisation_id),
                   n_examples=submission.n_local_examples, validation_score=submission.local_validation_score,
                   n_models=submission.model_files.count(),
                   label_distribution=tuple(submission.label_distribution) if submission.label_distribution else None)
            for submission in submissions]


@functools.lru_cache(maxsize=8)
def _arrays(stored_name: str) -> dict[str, np.ndarray]:
    """A public dataset or evaluation split, read once per process (artifacts are immutable)."""
    return arrays_from_npz(stored_name)
