"""FAug's training, the market's side: the states of an augmentation's training and their writes. The worker's side
(workers.augmentation_training) trains the generator and records the outcome through these services: claim
(queued → training), requeue after a transient error, publish the generator (charging the reserved ε), or end it
failed or cancelled (releasing the reservation). The reaper republishes starts no worker took, fails trainings
whose worker died and ends cancelled trainings whose worker no longer checks."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.audit.services import audit_record
from market.augmentations.models import Augmentation, AugmentationOutbox, AugmentationStatus
from market.augmentations.spending import augmentation_budget_charge, augmentation_budget_release
from market.outbox import outbox_add, outbox_published_long_ago
from market.storage import artifact_save, artifacts_removed_on_error

CANCELLED_REASON = "Cancelled during training; nothing was published and nothing was charged."


def augmentation_training_claim(*, augmentation_id: int) -> bool:
    """queued → training, a conditional UPDATE: one claimer wins. Whether this call claimed it."""
    return bool(
        Augmentation.objects.filter(id=augmentation_id, status=AugmentationStatus.QUEUED).update(
            status=AugmentationStatus.TRAINING, training_started_at=timezone.now()
        )
    )


def augmentation_training_requeue(*, augmentation_id: int) -> None:
    """Put the row back in the queue after a transient error, so that the task's retry can claim it."""
    Augmentation.objects.filter(id=augmentation_id).update(status=AugmentationStatus.QUEUED)


def augmentation_publish(*, augmentation: Augmentation, data: bytes, spec: dict) -> None:
    """training → published with the generator's file (a CTGAN's samples) and charge the reserved ε; a training
    the reaper ended meanwhile stays ended, and a cancel asked after the last step is still honoured."""
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        locked = Augmentation.objects.select_for_update().get(id=augmentation.id)
        if locked.status != AugmentationStatus.TRAINING:  # the reaper ended it meanwhile
            return
        if locked.cancel_requested_at is not None:  # asked after the last step: still honoured
            augmentation_training_end(
                augmentation=augmentation,
                status=AugmentationStatus.CANCELLED,
                reason=CANCELLED_REASON,
            )
            return
        augmentation.generator_file = artifact_save(
            name=f"generators/augmentation-{augmentation.id}.{augmentation.published_extension}",
            data=data,
            stored_names=stored_names,
        )
        augmentation.generator_spec = spec
        augmentation.generator_bytes = len(data)
        augmentation.status = AugmentationStatus.PUBLISHED
        augmentation.finished_at = timezone.now()
        augmentation.save(
            update_fields=[
                "generator_file",
                "generator_spec",
                "generator_bytes",
                "status",
                "finished_at",
            ]
        )
        augmentation_budget_charge(augmentation=augmentation)
        audit_record(
            action="augmentation.published",
            target=augmentation,
            organisation=None,
            details={"bytes": len(data), **_copies_dropped(spec)},
        )


def _copies_dropped(spec: dict) -> dict:
    return (
        {"seed_copies_dropped": spec["seed_copies_dropped"]}
        if "seed_copies_dropped" in spec
        else {}
    )


def augmentation_training_cancel(*, augmentation: Augmentation) -> bool:
    """training → cancelled, asked during training: nothing was published or charged."""
    return augmentation_training_end(
        augmentation=augmentation, status=AugmentationStatus.CANCELLED, reason=CANCELLED_REASON
    )


def augmentation_training_fail(*, augmentation: Augmentation, reason: str) -> bool:
    """training → failed and release the reservation; whether this call failed it."""
    return augmentation_training_end(
        augmentation=augmentation, status=AugmentationStatus.FAILED, reason=reason
    )


def augmentation_training_end(*, augmentation: Augmentation, status: str, reason: str) -> bool:
    """training → failed or cancelled (a conditional UPDATE) and release the reservation: nothing was published, so
    nothing is charged. Whether this call ended it."""
    with transaction.atomic():
        ended = Augmentation.objects.filter(
            id=augmentation.id, status=AugmentationStatus.TRAINING
        ).update(status=status, status_reason=reason, finished_at=timezone.now())
        if not ended:
            return False
        augmentation_budget_release(augmentation=augmentation)
        audit_record(
            action=f"augmentation.{status}",
            target=augmentation,
            organisation=None,
            details={"reason": reason[:500]},
        )
    return True


def augmentation_reap() -> dict:
    """Publish again the starts no worker took for ``ONEFOLD_JOB_REPUBLISH_SECONDS``, fail the trainings claimed
    longer ago than the task time limit (their worker died; nothing was published, so nothing is charged) and
    cancel those whose cancel was asked longer than ``ONEFOLD_JOB_LEASE_SECONDS`` ago (a live worker stops within
    a second of it: theirs died)."""
    stale = outbox_published_long_ago(
        Augmentation.objects.filter(status=AugmentationStatus.QUEUED),
        older_than_seconds=settings.ONEFOLD_JOB_REPUBLISH_SECONDS,
    )
    republished = 0
    for augmentation_id in stale.values_list("id", flat=True):
        with transaction.atomic():
            outbox_add(AugmentationOutbox(augmentation_id=augmentation_id))
        republished += 1
    cutoff = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    failed = 0
    for augmentation in Augmentation.objects.filter(
        status=AugmentationStatus.TRAINING, training_started_at__lt=cutoff
    ):
        failed += augmentation_training_fail(
            augmentation=augmentation,
            reason=f"The worker training this generator stopped (claimed at "
            f"{augmentation.training_started_at:%Y-%m-%d %H:%M:%S} UTC, past the "
            f"{settings.CELERY_TASK_TIME_LIMIT} s limit); nothing was charged.",
        )
    cancel_cutoff = timezone.now() - timedelta(seconds=settings.ONEFOLD_JOB_LEASE_SECONDS)
    cancelled = 0
    for augmentation in Augmentation.objects.filter(
        status=AugmentationStatus.TRAINING, cancel_requested_at__lt=cancel_cutoff
    ):
        cancelled += augmentation_training_end(
            augmentation=augmentation,
            status=AugmentationStatus.CANCELLED,
            reason="Cancelled; the worker training it no longer answered, and nothing was charged.",
        )
    return {"republished": republished, "failed": failed, "cancelled": cancelled}
