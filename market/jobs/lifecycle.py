"""A job's state machine after its launch, owned here: the claim of a queued job, its stage, the claim of its
fusion, its stored noise, its success (the global model and its files, saved with the budget charge), its end
(failed or cancelled, the budget settled) and the reaper's re-queue. The worker side (workers.runner) computes and
calls these; each change is a conditional UPDATE or sits under the job's row lock, so only one worker wins.

A job that ends before its release step (:func:`market.jobs.services.job_release`) has released nothing derived
from its votes: its reservation is refunded, its stored noisy answers are deleted, and a step's error that came
after its noise was drawn is not shown (it may carry what the noisy votes made: :data:`WITHHELD_REASON`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from market.jobs.chunks import job_chunks_requeue_running
from market.jobs.leases import lease_expiry
from market.jobs.models import GlobalModel, GlobalModelFile, Job, JobPhase, JobStatus
from market.jobs.selectors import jobs_awaiting_fusion, server_noise_used
from market.jobs.services import CHARGED_FOR_MODEL, job_enqueue, job_log, job_settle_budget
from market.jobs.spending import job_budget_charge
from market.storage import artifact_save, artifacts_removed_on_error, sha256_of
from workers.privacy.reports import JobPrivacyReport

logger = logging.getLogger(__name__)

#: The failure reason of a step that failed after the job's noise was drawn and before its release step.
WITHHELD_REASON = (
    "The job failed after its noise was drawn and before its release step. Its error may depend on the noisy "
    "votes, so it is kept in the worker's log for the platform's administrators; nothing derived from the votes "
    "was released, and no silo is charged."
)


class JobSuperseded(Exception):
    """The job was cancelled or handed to another worker while this one fused; its result is dropped."""


class GlobalModelFileData(Protocol):
    """One file of a global model as the engine exported it (workers.modelio.artifact.ExportedFile)."""

    filename: str
    role: str
    format: str
    data: bytes


def job_claim(*, job_id: int, worker: str) -> Job | None:
    """Claim a queued job for ``worker`` (queued → running, predicting); the job, or None if another worker won."""
    now = timezone.now()
    # The UPDATE is the claim: a duplicate or redelivered start message finds the row no longer queued and
    # changes nothing. attempts counts claims (the reaper fails the job after ONEFOLD_JOB_MAX_ATTEMPTS), and a
    # re-queued job keeps the moment it first started.
    claimed = Job.objects.filter(id=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
        status=JobStatus.RUNNING,
        phase=JobPhase.PREDICTING,
        worker=worker,
        heartbeat_at=now,
        lease_expires_at=lease_expiry(now=now),
        attempts=F("attempts") + 1,
        started_at=Coalesce("started_at", now),
    )
    if not claimed:
        return None
    job = Job.objects.get(id=job_id)
    job_log(job_id=job_id, message=f"Claimed by worker {worker} (attempt {job.attempts}).")
    return job


def job_stage_set(*, job_id: int, stage: str) -> None:
    Job.objects.filter(id=job_id).update(progress_stage=stage)
    job_log(job_id=job_id, message=f"Stage: {stage}.")


def job_fusion_claim(*, job_id: int, worker: str) -> bool:
    """Claim the fusion of a job whose every chunk is done (predicting → fusing); False if another worker won."""
    now = timezone.now()
    # phase and status are conditions on the updated row: re-checked after a concurrent claim's lock is released
    return (
        jobs_awaiting_fusion()
        .filter(id=job_id, cancel_requested=False)
        .update(
            phase=JobPhase.FUSING,
            worker=worker,
            heartbeat_at=now,
            lease_expires_at=lease_expiry(now=now),
        )
        == 1
    )


def job_fusion_release(*, job_id: int, worker: str) -> None:
    """Hand a fusion back (a transient error: the retried task claims it again)."""
    Job.objects.filter(
        id=job_id, status=JobStatus.RUNNING, phase=JobPhase.FUSING, worker=worker
    ).update(phase=JobPhase.PREDICTING)


def job_noise_stored(*, job: Job, name: str) -> None:
    """Record that an L1 job's noisy answers were drawn and stored as ``name``: spent from now on, replayed by a
    retry. Committed before the answers are used."""
    Job.objects.filter(id=job.id).update(noisy_answers_name=name, noise_drawn_at=timezone.now())
    job.noisy_answers_name, job.noise_drawn_at = name, timezone.now()
    job_log(job_id=job.id, message="Noise drawn and stored; a retry reuses these noisy answers.")


def _superseded(job: Job, *, worker: str) -> bool:
    return (
        job.status != JobStatus.RUNNING
        or job.phase != JobPhase.FUSING
        or job.worker != worker
        or job.cancel_requested
    )


def job_succeed(
    *,
    job: Job,
    worker: str,
    fields: dict,
    files: Iterable[GlobalModelFileData],
    privacy_report: JobPrivacyReport,
) -> GlobalModel:
    """Save the global model (``fields``) and its ``files`` and mark the job succeeded, charging an L1 job's budget,
    in one transaction; JobSuperseded (nothing saved) if ``worker`` no longer holds the job's fusion."""
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        # Re-read under the row lock: a cancel, or the reaper handing the job to another worker while this one
        # fused, drops this result (JobSuperseded) instead of saving a second global model or charging twice.
        locked = Job.objects.select_for_update().get(id=job.id)
        if _superseded(locked, worker=worker):
            raise JobSuperseded()
        global_model = GlobalModel.objects.create(job=locked, **fields)
        for file in files:
            stored_name = artifact_save(
                name=f"federations/{job.federation.slug}/global-models/{global_model.id}/"
                f"{file.filename}",
                data=file.data,
                stored_names=stored_names,
            )
            GlobalModelFile.objects.create(
                global_model=global_model,
                role=file.role,
                format=file.format,
                stored_name=stored_name,
                sha256=sha256_of(file.data),
                size_bytes=len(file.data),
            )
        locked.status, locked.finished_at, locked.phase = JobStatus.SUCCEEDED, timezone.now(), ""
        locked.progress_stage, locked.worker, locked.lease_expires_at = "done", "", None
        locked.save(
            update_fields=[
                "status",
                "finished_at",
                "phase",
                "progress_stage",
                "worker",
                "lease_expires_at",
            ]
        )
        if server_noise_used(privacy_level=job.privacy_level):
            job_budget_charge(
                job=locked,
                privacy_report=privacy_report,
                reason=CHARGED_FOR_MODEL.format(global_model=global_model.id),
            )
        job_log(job_id=job.id, message=f"Succeeded: global model #{global_model.id} saved.")
    job_artifacts_delete(
        job=job
    )  # after the commit, as in job_end: a rollback keeps what a retry reads
    return global_model


def job_artifacts_delete(*, job: Job) -> None:
    """The chunks' partial results: deleted once the job has ended (they name which member predicted what)."""
    for name in job.chunks.exclude(artifact_name="").values_list("artifact_name", flat=True):
        default_storage.delete(name)


def job_end(*, job_id: int, status: str, reason: str = "", step_error: bool = False) -> bool:
    """Move a running (or queued) job to failed or cancelled, settling its budget; False if it had already ended.
    ``step_error``: ``reason`` is a step's own error, withheld if it came after the noise and before the release."""
    with transaction.atomic():
        # The row lock orders this against a concurrent end or save of the same job: the budget is settled once.
        job = (
            Job.objects.select_for_update()
            .filter(id=job_id, status__in=[JobStatus.RUNNING, JobStatus.QUEUED])
            .first()
        )
        if job is None:
            return False
        unreleased_answers = job.noisy_answers_name if job.released_at is None else ""
        if step_error and job.noise_drawn_at is not None and job.released_at is None:
            logger.warning("Job %s failed before its release step: %s", job_id, reason)
            reason = WITHHELD_REASON
        job.status, job.failure_reason, job.finished_at = status, reason, timezone.now()
        job.worker, job.lease_expires_at, job.phase = "", None, ""
        job.noisy_answers_name = "" if unreleased_answers else job.noisy_answers_name
        job.save(
            update_fields=[
                "status",
                "failure_reason",
                "finished_at",
                "worker",
                "lease_expires_at",
                "phase",
                "noisy_answers_name",
            ]
        )
        job_settle_budget(job=job)
        job_log(
            job_id=job.id,
            level="error" if status == JobStatus.FAILED else "info",
            message=f"Failed: {reason}"
            if status == JobStatus.FAILED
            else "Cancelled; no global model was made.",
        )
    # after the commit: a rolled-back end leaves the chunks' files (and the noisy answers) a retry reads
    job_artifacts_delete(job=job)
    # never released, never reused: nothing derived from the noisy answers may outlive the job
    if unreleased_answers:
        default_storage.delete(unreleased_answers)
    return True


def job_fail(*, job_id: int, reason: str, step_error: bool = False) -> bool:
    """:func:`job_end` as failed with ``reason``."""
    return job_end(job_id=job_id, status=JobStatus.FAILED, reason=reason, step_error=step_error)


def job_end_if_cancelled(*, job_id: int) -> bool:
    """End the job if a cancel was asked (True), so that the worker's step stops; False if it goes on."""
    if Job.objects.filter(id=job_id, cancel_requested=True).exists():
        job_end(job_id=job_id, status=JobStatus.CANCELLED)
        return True
    return False


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "never"


def job_lease_expired_settle(*, job: Job) -> str:
    """The reaper's answer to a running job whose lease expired (read as ``job``): "cancelled" if a cancel was asked,
    "failed" after ``ONEFOLD_JOB_MAX_ATTEMPTS`` claims, else "requeued"; "" if it had moved on meanwhile."""
    if job.cancel_requested:
        return "cancelled" if job_end(job_id=job.id, status=JobStatus.CANCELLED) else ""
    if job.attempts >= settings.ONEFOLD_JOB_MAX_ATTEMPTS:
        reason = (
            f"The worker running this job stopped sending heartbeats (last at {_when(job.heartbeat_at)}) on "
            f"attempt {job.attempts} of {job.attempts}; it was not retried again."
        )
        return "failed" if job_fail(job_id=job.id, reason=reason) else ""
    return "requeued" if _requeue(job) else ""


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
        job_chunks_requeue_running(job=job)
        job_log(
            job_id=job.id,
            level="warning",
            message=f"No heartbeat from worker {job.worker or 'unknown'} since "
            f"{_when(job.heartbeat_at)}; re-queued.",
        )
        job_enqueue(job=job)
    return True


def job_start_republish(*, job: Job) -> None:
    """Publish a queued job's start message again (no worker took the first: a broker that lost it)."""
    with transaction.atomic():
        job_log(
            job_id=job.id,
            level="warning",
            message="No worker took this job's start message; published it again.",
        )
        job_enqueue(job=job)
