"""How a job's steps stop: bad input fails the job at once, an unexpected error fails it with a readable reason,
a cancel ends it between steps, and ending it settles its budget and deletes its partial artifacts.

A job that ends before its release step (:func:`market.jobs.services.job_release`) has released nothing derived
from its votes: its reservation is refunded, its stored noisy answers are deleted, and a step's error that came
after its noise was drawn is not shown (it may carry what the noisy votes made: :data:`WITHHELD_REASON`)."""

from __future__ import annotations

import functools
import logging

from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from market.jobs.models import Job, JobChunk, JobStatus
from market.jobs.services import job_log, job_settle_budget
from market.transient import TRANSIENT_ERRORS

logger = logging.getLogger("workers.runner")

#: The failure reason of a step that failed after the job's noise was drawn and before its release step.
WITHHELD_REASON = (
    "The job failed after its noise was drawn and before its release step. Its error may depend on the noisy "
    "votes, so it is kept in the worker's log for the platform's administrators; nothing derived from the votes "
    "was released, and no silo is charged."
)


class JobInputError(Exception):
    """Bad input (a corrupt artifact, a deleted submission, a model that fails): the job fails at once."""


class JobSuperseded(Exception):
    """The job was cancelled or handed to another worker while this one fused; its result is dropped."""


def job_stage_set(*, job_id: int, stage: str) -> None:
    Job.objects.filter(id=job_id).update(progress_stage=stage)
    job_log(job_id=job_id, message=f"Stage: {stage}.")


def failing_on_unexpected(step: str):
    """Unexpected errors (a bug, a time limit) fail the job with a readable reason instead of leaving it running;
    transient ones (database, broker) propagate so that the task retries with backoff."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*, job_id: int | None = None, chunk_id: int | None = None):
            try:
                return function(
                    **({"job_id": job_id} if chunk_id is None else {"chunk_id": chunk_id})
                )
            except TRANSIENT_ERRORS + (JobSuperseded,):
                # transient: the task retries the step; superseded: another worker owns the job now, and failing
                # it here would end that worker's run
                raise
            except Exception as error:
                logger.exception("Job step %s failed", step)
                owner = (
                    job_id
                    if chunk_id is None
                    else JobChunk.objects.filter(id=chunk_id)
                    .values_list("job_id", flat=True)
                    .first()
                )
                if owner is not None:
                    job_end(
                        job_id=owner,
                        status=JobStatus.FAILED,
                        reason=f"Internal error while {step}: {type(error).__name__}: {error}",
                        step_error=True,
                    )
                return None

        return wrapper

    return decorate


def job_artifacts_delete(*, job: Job) -> None:
    """The chunks' partial results: deleted once the job has ended (they name which member predicted what)."""
    for name in (
        JobChunk.objects.filter(job=job)
        .exclude(artifact_name="")
        .values_list("artifact_name", flat=True)
    ):
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


def job_stop_if_cancelled(*, job_id: int) -> bool:
    """End the job if a cancel was asked (True), so that the step stops; False if it goes on."""
    if Job.objects.filter(id=job_id, cancel_requested=True).exists():
        job_end(job_id=job_id, status=JobStatus.CANCELLED)
        return True
    return False
