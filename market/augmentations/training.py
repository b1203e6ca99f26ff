"""FAug's worker side: train the generator of a queued augmentation on the pooled seeds and publish it (charging the
reserved ε), or fail and release; a cancel asked during training stops it between two steps and releases. The
reaper republishes starts no worker took, fails trainings whose worker died and ends cancelled trainings whose
worker no longer checks."""

import logging
import time
from collections.abc import Callable
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.audit.services import audit_record
from market.augmentations.models import (
    Augmentation,
    AugmentationOutbox,
    AugmentationStatus,
    GeneratorKind,
)
from market.augmentations.services import augmentation_public_features
from market.augmentations.spending import augmentation_budget_charge, augmentation_budget_release
from market.outbox import outbox_add, outbox_published_long_ago
from market.storage import artifact_save, artifacts_removed_on_error
from market.transient import TRANSIENT_ERRORS
from workers.algorithms.faug.copies import NEAR_COPY_TOLERANCE, SeedCopiesError, drop_seed_copies
from workers.algorithms.faug.generator import save_generator
from workers.algorithms.faug.samples import samples_save
from workers.algorithms.faug.tabular import TabularSetting, tabular_samples
from workers.algorithms.faug.training import (
    GanSetting,
    GeneratorPrivacy,
    TrainingCancelled,
    train_generator,
)
from workers.privacy.dp_sgd import DpSgdParameters

logger = logging.getLogger(__name__)
CANCELLED_REASON = "Cancelled during training; nothing was published and nothing was charged."


def augmentation_train(*, augmentation_id: int) -> None:
    """The worker's step: queued → training (one claimer wins), train on the pooled seeds, then publish the
    generator (a CTGAN's generated samples) and charge, or fail and release. A transient error puts the row back
    in the queue."""
    claimed = Augmentation.objects.filter(
        id=augmentation_id, status=AugmentationStatus.QUEUED
    ).update(status=AugmentationStatus.TRAINING, training_started_at=timezone.now())
    if not claimed:
        return  # already done by another delivery
    augmentation = Augmentation.objects.select_related("federation").get(id=augmentation_id)
    stop_requested = augmentation_stop_requested(augmentation_id=augmentation_id)
    try:
        data, spec = (
            _tabular_samples(augmentation, stop_requested)
            if augmentation.generator == GeneratorKind.CTGAN
            else _trained_generator(augmentation, stop_requested)
        )
    except TrainingCancelled:
        _end(augmentation, AugmentationStatus.CANCELLED, CANCELLED_REASON)
        return
    except TRANSIENT_ERRORS:
        Augmentation.objects.filter(id=augmentation_id).update(status=AugmentationStatus.QUEUED)
        raise
    except (
        SeedCopiesError
    ) as error:  # the rows would publish the seeds: nothing is published or charged
        _fail(augmentation, f"Publication refused: {error}")
        return
    except (
        Exception
    ) as error:  # any failure of training: nothing is published, so nothing is charged
        logger.exception("Augmentation #%s failed", augmentation_id)
        _fail(augmentation, f"Training the generator failed: {error}")
        return
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        locked = Augmentation.objects.select_for_update().get(id=augmentation.id)
        if locked.status != AugmentationStatus.TRAINING:  # the reaper ended it meanwhile
            return
        if locked.cancel_requested_at is not None:  # asked after the last step: still honoured
            _end(augmentation, AugmentationStatus.CANCELLED, CANCELLED_REASON)
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


def augmentation_stop_requested(
    *, augmentation_id: int, every_seconds: float = 1.0
) -> Callable[[], bool]:
    """What the training asks before each step: True once a cancel was asked or the row no longer trains (the
    reaper ended it). It reads the row at most every ``every_seconds``: a step can last a millisecond."""
    checked_at, stop = time.monotonic(), False

    def stop_requested() -> bool:
        nonlocal checked_at, stop
        if not stop and time.monotonic() - checked_at >= every_seconds:
            checked_at = time.monotonic()
            stop = not Augmentation.objects.filter(
                id=augmentation_id,
                status=AugmentationStatus.TRAINING,
                cancel_requested_at__isnull=True,
            ).exists()
        return stop

    return stop_requested


def augmentation_seeds(augmentation: Augmentation) -> tuple[np.ndarray, np.ndarray]:
    """The pooled seeds: features (n, n_features) float32 and labels (n,) int64, in upload order."""
    uploads = list(augmentation.seeds.order_by("id"))
    features = [
        np.frombuffer(bytes(upload.features), dtype=np.float32).reshape(-1, augmentation.n_features)
        for upload in uploads
    ]
    labels = [np.asarray(upload.labels, dtype=np.int64) for upload in uploads]
    return np.concatenate(features), np.concatenate(labels)


def _copies_dropped(spec: dict) -> dict:
    return (
        {"seed_copies_dropped": spec["seed_copies_dropped"]}
        if "seed_copies_dropped" in spec
        else {}
    )


def _tabular_samples(
    augmentation: Augmentation, stop_requested: Callable[[], bool]
) -> tuple[bytes, dict]:
    """A CTGAN trained on the pooled seeds and the samples it generates of each seeded label (never the model),
    less the rows that copy a seed row (workers.algorithms.faug.copies; too many refuse publication)."""
    features, labels = augmentation_seeds(augmentation)
    rows_per_label = settings.ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL
    generated, generated_labels = tabular_samples(
        features,
        labels,
        n_classes=augmentation.federation.n_classes,
        rows_per_label=rows_per_label,
        setting=TabularSetting(epochs=augmentation.epochs, batch_size=augmentation.batch_size),
        seed=augmentation.id,
        stop_requested=stop_requested,
    )
    generated, generated_labels, dropped = drop_seed_copies(generated, generated_labels, features)
    spec = {
        "architecture": "ctgan_samples",
        "n_features": augmentation.n_features,
        "n_classes": augmentation.federation.n_classes,
        "rows_per_label": rows_per_label,
        "rows": len(generated_labels),
        "seed_copies_dropped": dropped,
        "near_copy_tolerance": NEAR_COPY_TOLERANCE,
    }
    return samples_save(generated, generated_labels), spec


def _trained_generator(
    augmentation: Augmentation, stop_requested: Callable[[], bool]
) -> tuple[bytes, dict]:
    features, labels = augmentation_seeds(augmentation)
    privacy = None
    if augmentation.private:
        reserved = DpSgdParameters.from_declaration(
            {
                key: value
                for key, value in augmentation.privacy_parameters.items()
                if key != "n_examples"
            },
            n_examples=augmentation.privacy_parameters["n_examples"],
        )
        if reserved.n_examples != len(labels):
            raise RuntimeError(
                f"{len(labels)} seeds are stored but {reserved.n_examples} were reserved for."
            )
        privacy = GeneratorPrivacy(
            noise_multiplier=reserved.noise_multiplier,
            max_grad_norm=reserved.max_grad_norm,
            delta=reserved.delta,
        )
    public_features = None
    if augmentation.public_dataset is not None:
        # checked in [0, 1] at opening; un-standardising may land a rounding error outside
        public_features = np.clip(augmentation_public_features(augmentation.public_dataset), 0, 1)
    trained = train_generator(
        features,
        labels,
        n_classes=augmentation.federation.n_classes,
        setting=GanSetting(epochs=augmentation.epochs, batch_size=augmentation.batch_size),
        seed=augmentation.id,
        privacy=privacy,
        public_features=public_features,
        stop_requested=stop_requested,
    )
    return save_generator(trained), trained.spec


def _fail(augmentation: Augmentation, reason: str) -> bool:
    """training → failed and release the reservation; whether this call failed it."""
    return _end(augmentation, AugmentationStatus.FAILED, reason)


def _end(augmentation: Augmentation, status: str, reason: str) -> bool:
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
        failed += _fail(
            augmentation,
            f"The worker training this generator stopped (claimed at "
            f"{augmentation.training_started_at:%Y-%m-%d %H:%M:%S} UTC, past the "
            f"{settings.CELERY_TASK_TIME_LIMIT} s limit); nothing was charged.",
        )
    cancel_cutoff = timezone.now() - timedelta(seconds=settings.ONEFOLD_JOB_LEASE_SECONDS)
    cancelled = 0
    for augmentation in Augmentation.objects.filter(
        status=AugmentationStatus.TRAINING, cancel_requested_at__lt=cancel_cutoff
    ):
        cancelled += _end(
            augmentation,
            AugmentationStatus.CANCELLED,
            "Cancelled; the worker training it no longer answered, and nothing was charged.",
        )
    return {"republished": republished, "failed": failed, "cancelled": cancelled}
