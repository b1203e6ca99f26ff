"""FAug's training, the worker's side (the augmentations queue): train the generator of a claimed augmentation on
the pooled seeds, or a CTGAN and the samples it generates, and hand the result to the market. Every state change
(claim, requeue after a transient error, publish and charge, fail or cancel and release) is a service of
market.augmentations.training; this module only computes, and reaches rows through those services and the
app's selectors (the contract ``worker-side-reads-no-market-models``). A cancel asked during training stops it
between two steps."""

import logging
import time
from collections.abc import Callable

import numpy as np
from django.conf import settings

from market.augmentations.selectors import (
    augmentation_for_training,
    augmentation_seeds,
    augmentation_still_training,
)
from market.augmentations.services import augmentation_public_features
from market.augmentations.training import (
    augmentation_publish,
    augmentation_training_cancel,
    augmentation_training_claim,
    augmentation_training_fail,
    augmentation_training_requeue,
)
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


def augmentation_train(*, augmentation_id: int) -> None:
    """The worker's step: queued → training (one claimer wins), train on the pooled seeds, then publish the
    generator (a CTGAN's generated samples) and charge, or fail and release. A transient error puts the row back
    in the queue."""
    if not augmentation_training_claim(augmentation_id=augmentation_id):
        return  # already done by another delivery
    augmentation = augmentation_for_training(augmentation_id=augmentation_id)
    stop_requested = augmentation_stop_requested(augmentation_id=augmentation_id)
    try:
        data, spec = (
            _tabular_samples(augmentation, stop_requested)
            if augmentation.publishes_samples
            else _trained_generator(augmentation, stop_requested)
        )
    except TrainingCancelled:
        augmentation_training_cancel(augmentation=augmentation)
        return
    except TRANSIENT_ERRORS:
        augmentation_training_requeue(augmentation_id=augmentation_id)
        raise
    except (
        SeedCopiesError
    ) as error:  # the rows would publish the seeds: nothing is published or charged
        augmentation_training_fail(
            augmentation=augmentation, reason=f"Publication refused: {error}"
        )
        return
    except (
        Exception
    ) as error:  # any failure of training: nothing is published, so nothing is charged
        logger.exception("Augmentation #%s failed", augmentation_id)
        augmentation_training_fail(
            augmentation=augmentation, reason=f"Training the generator failed: {error}"
        )
        return
    augmentation_publish(augmentation=augmentation, data=data, spec=spec)


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
            stop = not augmentation_still_training(augmentation_id=augmentation_id)
        return stop

    return stop_requested


def _tabular_samples(augmentation, stop_requested: Callable[[], bool]) -> tuple[bytes, dict]:
    """A CTGAN trained on the pooled seeds and the samples it generates of each seeded label (never the model),
    less the rows that copy a seed row (workers.algorithms.faug.copies; too many refuse publication)."""
    features, labels = augmentation_seeds(augmentation=augmentation)
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


def _generator_privacy(augmentation, *, n_seeds: int) -> GeneratorPrivacy | None:
    """The DP-SGD parameters the reservation was made for, or None for a generator trained without noise."""
    if not augmentation.private:
        return None
    reserved = DpSgdParameters.from_declaration(
        {
            key: value
            for key, value in augmentation.privacy_parameters.items()
            if key != "n_examples"
        },
        n_examples=augmentation.privacy_parameters["n_examples"],
    )
    if reserved.n_examples != n_seeds:
        raise RuntimeError(
            f"{n_seeds} seeds are stored but {reserved.n_examples} were reserved for."
        )
    return GeneratorPrivacy(
        noise_multiplier=reserved.noise_multiplier,
        max_grad_norm=reserved.max_grad_norm,
        delta=reserved.delta,
    )


def _trained_generator(augmentation, stop_requested: Callable[[], bool]) -> tuple[bytes, dict]:
    features, labels = augmentation_seeds(augmentation=augmentation)
    privacy = _generator_privacy(augmentation, n_seeds=len(labels))
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
