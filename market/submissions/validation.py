"""A stored submission's validation, the market's side: the row's states and their writes. The worker's side
(workers.submission_validation) computes the verdict (its models predict public rows in the sandbox) and records it
through these services; the upload's own checks, before anything is stored, are market.submissions.services'.

The row is the truth, as for a job: a validation claims it with a conditional UPDATE (pending → validating), so a
redelivered message validates nothing twice, and a reaper queues again the rows whose message or worker was lost.
"""

import os
import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.outbox import outbox_add, outbox_published_long_ago
from market.submissions.models import Submission, SubmissionOutbox, SubmissionStatus


def submission_validation_claim(*, submission_id: int) -> bool:
    """Flip pending → validating (one claimer wins); a row left validating past the task time limit may be
    claimed again. Whether this call claimed it."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    claimable = Submission.objects.filter(
        id=submission_id, status=SubmissionStatus.PENDING
    ) | Submission.objects.filter(
        id=submission_id, status=SubmissionStatus.VALIDATING, validation_started_at__lt=stale
    )
    return (
        Submission.objects.filter(id__in=claimable.values("id")).update(
            status=SubmissionStatus.VALIDATING,
            validation_started_at=now,
            validated_by=f"{socket.gethostname()}:{os.getpid()}",
        )
        == 1
    )


def submission_for_validation(*, submission_id: int) -> Submission:
    """The claimed submission with its federation, public dataset and model files in upload order."""
    return (
        Submission.objects.select_related("federation", "public_dataset")
        .prefetch_related("model_files")
        .get(id=submission_id)
    )


def submission_validation_decide(*, submission: Submission, reason: str | None) -> bool:
    """validating → valid (``reason`` None) or rejected with ``reason``, audited; a conditional UPDATE, so a row
    the reaper handed to another worker meanwhile is decided once. Whether this call decided it."""
    with transaction.atomic():
        decided = Submission.objects.filter(
            id=submission.id, status=SubmissionStatus.VALIDATING
        ).update(
            status=SubmissionStatus.REJECTED if reason else SubmissionStatus.VALID,
            rejection_reason=reason or "",
            validated_at=timezone.now(),
        )
        if decided:
            audit_record(
                action="submission.validated",
                outcome=AuditOutcome.REFUSED if reason else AuditOutcome.SUCCESS,
                organisation=submission.organisation,
                target=submission,
                details={"reason": reason or ""},
            )
    return bool(decided)


def submission_validation_release(*, submission_id: int) -> None:
    """Hand a claimed row back (validating → pending) after a transient error, so that the retry can claim it."""
    Submission.objects.filter(id=submission_id, status=SubmissionStatus.VALIDATING).update(
        status=SubmissionStatus.PENDING, validation_started_at=None, validated_by=""
    )


def submission_reap() -> int:
    """Queue again the validations whose message a broker lost or whose worker died (pending, or validating past
    the task time limit, with every message published over ``ONEFOLD_JOB_REPUBLISH_SECONDS`` ago)."""
    stale_claim = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    waiting = Submission.objects.filter(
        status=SubmissionStatus.PENDING
    ) | Submission.objects.filter(
        status=SubmissionStatus.VALIDATING, validation_started_at__lt=stale_claim
    )
    stale = outbox_published_long_ago(
        waiting, older_than_seconds=settings.ONEFOLD_JOB_REPUBLISH_SECONDS
    )
    requeued = 0
    for submission_id in stale.values_list("id", flat=True):
        with transaction.atomic():
            outbox_add(SubmissionOutbox(submission_id=submission_id))
        requeued += 1
    return requeued
