"""Validating a submission once it is stored, on a worker (the validations queue): its models are loaded in the
sandbox and predict a sample of the federation's public rows; the submission becomes valid, or rejected with the
first model's problem. The upload's own checks, before anything is stored, are market.submissions.services'.

The row is the truth, as for a job: a validation claims it with a conditional UPDATE (pending → validating), so a
redelivered message validates nothing twice, and a reaper queues again the rows whose message or worker was lost.
"""

import logging
import os
import socket
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.feature_views import model_files_feature_view, stored_features_in_view
from market.outbox import outbox_add, outbox_published_long_ago
from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz, artifact_read
from market.submissions.models import Submission, SubmissionOutbox, SubmissionStatus

logger = logging.getLogger(__name__)
#: How far a predicted row may stray from a probability distribution (below 0, or a sum off 1) in float32.
PROBABILITY_TOLERANCE = 1e-3


def _claim_for_validation(submission_id: int) -> bool:
    """Flip pending → validating; a row left validating past the task time limit may be claimed again."""
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


def _sample_public_features(submission: Submission) -> np.ndarray:
    features = arrays_from_npz(submission.public_dataset.features_file)["features"]
    n_rows = min(settings.ONEFOLD_VALIDATION_SAMPLE_ROWS, len(features))
    # Seeded by the submission: a retried validation predicts the same rows, so its verdict is not a new draw.
    rows = np.random.default_rng(submission.id).choice(len(features), size=n_rows, replace=False)
    view = model_files_feature_view(submission.model_files.all())
    return stored_features_in_view(features[np.sort(rows)], submission.public_dataset, view)


def _prediction_problem(probabilities: np.ndarray, *, n_rows: int, n_classes: int) -> str | None:
    if probabilities.shape != (n_rows, n_classes):
        return f"it returned predictions of shape {probabilities.shape}, expected ({n_rows}, {n_classes})."
    if not np.all(np.isfinite(probabilities)):
        return "it predicted non-finite probabilities."
    if np.any(probabilities < -PROBABILITY_TOLERANCE) or not np.allclose(
        probabilities.sum(axis=1), 1, atol=PROBABILITY_TOLERANCE
    ):
        return "its predicted probabilities are not a distribution over the federation's classes."
    return None


def _validation_failure(submission: Submission) -> str | None:
    """The reason the submission's models fail validation in the sandbox, or None when all pass."""
    model_files = list(submission.model_files.all())
    sample = _sample_public_features(submission)
    outcomes = stored_models_predict(
        [artifact_read(model_file.stored_name) for model_file in model_files],
        sample,
        n_classes=submission.federation.n_classes,
    )
    for model_file, outcome in zip(model_files, outcomes):
        problem = outcome.error or _prediction_problem(
            outcome.probabilities, n_rows=len(sample), n_classes=submission.federation.n_classes
        )
        if problem:
            return f"Model file '{model_file.original_name}' failed validation: {problem}"
    return None


def submission_validate(*, submission_id: int) -> None:
    """Load every model of the submission in the sandbox, predict on public rows, mark it valid or rejected."""
    if not _claim_for_validation(submission_id):
        return
    submission = Submission.objects.select_related("federation", "public_dataset").get(
        id=submission_id
    )
    try:
        reason = _validation_failure(submission)
    except (
        OperationalError,
        InterfaceError,
    ):  # the database went away: the task hands the row back and retries
        raise
    except Exception:
        logger.exception("Validation of submission %s failed inside the market", submission_id)
        reason = "The market could not validate this submission because of an internal error; an operator has been told."
    with transaction.atomic():
        decided = Submission.objects.filter(
            id=submission_id, status=SubmissionStatus.VALIDATING
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
