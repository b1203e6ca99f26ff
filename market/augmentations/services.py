"""FAug's writes on request: open an augmentation, upload a silo's seeds, start the generator's training, cancel it.

Starting refuses a training whose estimated work exceeds ``ONEFOLD_FAUG_MAX_WORK``, then reserves the DP
discriminator's example-level ε for every silo that contributed seeds (refused before any work when one would
overspend) and queues ``onefold.augmentation_train`` through the outbox; the worker (workers.augmentation_training)
trains, and the training's services (:mod:`market.augmentations.training`) charge the reservation when it publishes
the generator and release it when training fails or is cancelled (nothing was published, nothing is charged).
"""

import logging

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.accounts.models import User
from market.audit.services import audit_record
from market.augmentations.models import (
    Augmentation,
    AugmentationOutbox,
    AugmentationStatus,
    GeneratorKind,
    SeedUpload,
)
from market.augmentations.spending import augmentation_budget_release, augmentation_budget_reserve
from market.budgets.services import BudgetExceeded, budget_refusal_record
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from market.feature_views import stored_features_in_view
from market.federations.models import Federation, PrivacyLevel, PublicDataset
from market.federations.selectors import federation_is_member, public_dataset_current
from market.outbox import outbox_add
from market.storage import arrays_from_npz
from market.transient import retried_on_lock_conflict
from workers.algorithms.faug.training import MAX_PUBLIC_ROWS, GeneratorPrivacy
from workers.algorithms.faug.work import generator_training_work
from workers.features import ORDINAL_VIEW, view_width
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound

logger = logging.getLogger(__name__)

MAX_TABULAR_VALUE = 1e9  # a CTGAN's seeds are raw numbers, kept well inside float32


def augmentation_create(
    *,
    federation: Federation,
    name: str,
    n_features: int,
    epochs: int,
    batch_size: int,
    actor: User,
    noise_multiplier: float | None = None,
    target_epsilon: float | None = None,
    max_grad_norm: float = 1.0,
    delta: float = 1e-5,
    generator: str = GeneratorKind.MLP_GAN,
    use_public_data: bool = False,
) -> Augmentation:
    """An operator opens an augmentation in ``federation``. Its discriminator is DP when σ or a target ε is given,
    and must be when the federation does not allow L0 (no noise). A CTGAN (``generator="ctgan"``) is never DP: its
    gradient penalty defeats per-example clipping (:mod:`workers.algorithms.faug.tabular`). With
    ``use_public_data`` the MLP GAN first pretrains on the federation's current public data, unlabelled and at
    no ε (:func:`augmentation_public_features`)."""
    if not actor.is_operator:
        raise PermissionDenied("Only operators open federated augmentations.")
    if generator not in GeneratorKind.values:
        raise InvalidInput(
            f"'generator' is one of {', '.join(GeneratorKind.values)}, not {generator!r}.",
            field="generator",
        )
    if generator == GeneratorKind.CTGAN and (
        noise_multiplier is not None or target_epsilon is not None
    ):
        raise InvalidInput(
            "A CTGAN cannot be trained with DP-SGD (its discriminator's gradient penalty defeats per-example "
            "clipping); drop noise_multiplier and target_epsilon, or choose generator 'mlp_gan' for a DP "
            "generator.",
            field="noise_multiplier" if noise_multiplier is not None else "target_epsilon",
        )
    if not 1 <= n_features <= settings.ONEFOLD_FAUG_MAX_FEATURES:
        raise InvalidInput(
            f"Seed samples have 1 to {settings.ONEFOLD_FAUG_MAX_FEATURES} features, not {n_features}.",
            field="n_features",
        )
    if not 1 <= epochs <= settings.ONEFOLD_FAUG_MAX_EPOCHS:
        raise InvalidInput(
            f"The generator trains 1 to {settings.ONEFOLD_FAUG_MAX_EPOCHS} epochs, not {epochs}.",
            field="epochs",
        )
    if not 1 <= batch_size <= settings.ONEFOLD_FAUG_MAX_SEEDS:
        raise InvalidInput(
            f"The batch size is 1 to {settings.ONEFOLD_FAUG_MAX_SEEDS}, not {batch_size}.",
            field="batch_size",
        )
    private = noise_multiplier is not None or target_epsilon is not None
    if noise_multiplier is not None and target_epsilon is not None:
        raise InvalidInput(
            "Give either noise_multiplier or target_epsilon, not both.", field="target_epsilon"
        )
    if not private and PrivacyLevel.L0 not in federation.allowed_privacy_levels:
        raise InvalidInput(
            f"'{federation.slug}' does not allow training without noise (L0); give noise_multiplier or "
            "target_epsilon for the DP discriminator"
            + (
                " of generator 'mlp_gan' (a CTGAN cannot be DP)."
                if generator == GeneratorKind.CTGAN
                else "."
            ),
            field="noise_multiplier",
        )
    for label, value in (
        ("noise_multiplier", noise_multiplier),
        ("target_epsilon", target_epsilon),
        ("max_grad_norm", max_grad_norm),
    ):
        if value is not None and not (np.isfinite(value) and 0 < value <= 1_000):
            raise InvalidInput(
                f"'{label}' must be a number in (0, 1000], not {value}.", field=label
            )
    if not 0 < delta < 1:
        raise InvalidInput(
            f"'delta' must lie strictly between 0 and 1, not {delta}.", field="delta"
        )
    public_dataset = (
        _public_dataset_for_pretraining(federation, generator=generator, n_features=n_features)
        if use_public_data
        else None
    )
    with transaction.atomic():
        augmentation = Augmentation.objects.create(
            federation=federation,
            name=name,
            generator=generator,
            n_features=n_features,
            epochs=epochs,
            batch_size=batch_size,
            private=private,
            noise_multiplier=noise_multiplier,
            target_epsilon=target_epsilon,
            max_grad_norm=max_grad_norm,
            delta=delta,
            public_dataset=public_dataset,
            created_by=actor,
        )
        audit_record(
            action="augmentation.created",
            actor=actor,
            target=augmentation,
            details={"federation": federation.slug, "private": private, "generator": generator},
        )
    return augmentation


def augmentation_public_features(public_dataset: PublicDataset) -> np.ndarray:
    """The public rows the MLP GAN pretrains on: the stored matrix in the ordinal view, where numeric columns are
    the uploaded values (the stored one-hot view standardises them), as the silos' seed rows are."""
    stored = arrays_from_npz(public_dataset.features_file)["features"]
    return stored_features_in_view(stored, public_dataset, ORDINAL_VIEW).astype(np.float32)


def _public_dataset_for_pretraining(
    federation: Federation, *, generator: str, n_features: int
) -> PublicDataset:
    """The federation's current public dataset, if the MLP GAN can read it; InvalidInput saying why not."""
    if generator != GeneratorKind.MLP_GAN:
        raise InvalidInput(
            "Only the MLP GAN pretrains on the public data; choose generator 'mlp_gan' or drop "
            "use_public_data.",
            field="use_public_data",
        )
    try:
        public_dataset = public_dataset_current(federation=federation)
    except NotFound:
        raise InvalidInput(
            f"'{federation.slug}' has no public dataset to pretrain on; upload one or drop use_public_data.",
            field="use_public_data",
        ) from None
    width = view_width(public_dataset.feature_spec, ORDINAL_VIEW)
    if width != n_features:
        raise InvalidInput(
            f"The public data has {width} columns but seed rows have {n_features} features; they must match "
            "to pretrain on it.",
            field="use_public_data",
        )
    if public_dataset.n_rows > MAX_PUBLIC_ROWS:
        raise InvalidInput(
            f"The public data has {public_dataset.n_rows} rows; the GAN pretrains on at most {MAX_PUBLIC_ROWS}.",
            field="use_public_data",
        )
    features = augmentation_public_features(public_dataset)
    tolerance = 1e-4
    if not np.isfinite(features).all() or not (
        -tolerance <= features.min() and features.max() <= 1 + tolerance
    ):
        raise InvalidInput(
            f"The public data's values lie in [{features.min():.3g}, {features.max():.3g}]; the MLP GAN "
            "pretrains only on values in [0, 1], as the seeds' (rescale the public data or drop "
            "use_public_data).",
            field="use_public_data",
        )
    return public_dataset


def seeds_upload(
    *, augmentation: Augmentation, user: User, target_labels, labels, features
) -> SeedUpload:
    """Store one silo's seeds (once per augmentation, while it collects)."""
    federation = augmentation.federation
    if user.organisation_id is None or not federation_is_member(federation=federation, user=user):
        raise PermissionDenied(
            f"Your organisation is not a member of '{federation.slug}'; join it first."
        )
    if augmentation.status != AugmentationStatus.COLLECTING:
        raise Conflict(
            f"Augmentation #{augmentation.id} no longer collects seeds ({augmentation.get_status_display()})."
        )
    targets, rows, matrix = _seeds_checked(
        augmentation, target_labels=target_labels, labels=labels, features=features
    )
    n_target = sum(label in targets for label in rows)
    with transaction.atomic():
        locked = Augmentation.objects.select_for_update().get(id=augmentation.id)
        if locked.status != AugmentationStatus.COLLECTING:
            raise Conflict(f"Augmentation #{augmentation.id} started training while you uploaded.")
        if locked.seeds.filter(organisation_id=user.organisation_id).exists():
            raise Conflict(
                f"Your organisation already uploaded seeds to augmentation #{augmentation.id}."
            )
        upload = SeedUpload.objects.create(
            augmentation=locked,
            organisation_id=user.organisation_id,
            uploaded_by=user,
            target_labels=targets,
            labels=rows,
            features=matrix.tobytes(),
            n_target=n_target,
            n_redundant=len(rows) - n_target,
        )
        audit_record(
            action="augmentation.seeds_uploaded",
            actor=user,
            target=augmentation,
            details={"rows": len(rows)},
        )
    return upload


def _seeds_checked(
    augmentation: Augmentation, *, target_labels, labels, features
) -> tuple[list[int], list[int], np.ndarray]:
    """Target labels (sorted), row labels and the float32 feature matrix, or InvalidInput with a sentence."""
    n_classes, n_features = augmentation.federation.n_classes, augmentation.n_features
    maximum = settings.ONEFOLD_FAUG_MAX_SEEDS

    def class_index(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n_classes

    if (
        not isinstance(target_labels, list)
        or not target_labels
        or not all(class_index(value) for value in target_labels)
        or len(set(target_labels)) != len(target_labels)
    ):
        raise InvalidInput(
            f"'target_labels' must be a non-empty list of distinct class indices in 0 .. {n_classes - 1}."
        )
    if not isinstance(labels, list) or not 1 <= len(labels) <= maximum:
        raise InvalidInput(
            f"'labels' must be a list of 1 to {maximum} class indices, one per seed."
        )
    if not all(class_index(value) for value in labels):
        raise InvalidInput(f"Every seed's label must be a class index in 0 .. {n_classes - 1}.")
    if not isinstance(features, list) or len(features) != len(labels):
        raise InvalidInput(
            f"'features' must be a list of {len(labels)} rows, one per label, not "
            f"{len(features) if isinstance(features, list) else type(features).__name__}."
        )
    tabular = augmentation.generator == GeneratorKind.CTGAN
    low, high = (-MAX_TABULAR_VALUE, MAX_TABULAR_VALUE) if tabular else (0, 1)
    for number, row in enumerate(features):
        if not isinstance(row, list) or len(row) != n_features:
            raise InvalidInput(
                f"Seed row {number} must be a list of {n_features} numbers, as augmentation "
                f"#{augmentation.id} expects."
            )
        if not all(
            isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
            for value in row
        ):
            raise InvalidInput(
                f"Seed row {number} holds a value that is not a number in [{low:g}, {high:g}]."
            )
    missing = sorted(set(target_labels) - set(labels))
    if missing:
        raise InvalidInput(
            f"Upload at least one seed of each target label; none of {missing} is among your seeds."
        )
    return sorted(target_labels), labels, np.asarray(features, dtype=np.float32)


def augmentation_privacy(augmentation: Augmentation, *, n_examples: int) -> DpSgdParameters:
    """The DP-SGD run of the discriminator on ``n_examples`` pooled seeds (σ solved for a target ε)."""
    return GeneratorPrivacy(
        noise_multiplier=augmentation.noise_multiplier,
        target_epsilon=augmentation.target_epsilon,
        max_grad_norm=augmentation.max_grad_norm,
        delta=augmentation.delta,
    ).parameters(
        n_examples=n_examples, batch_size=augmentation.batch_size, epochs=augmentation.epochs
    )


@retried_on_lock_conflict
def augmentation_start(*, augmentation: Augmentation, actor: User, request=None) -> Augmentation:
    """collecting → queued: reserve the DP discriminator's ε for every contributing silo (or refuse without
    writing) and queue the training. Run again when the database broke a deadlock with another transaction
    on the same budgets (a job's finalisation charging the same silos)."""
    if not actor.is_operator:
        raise PermissionDenied("Only operators start a generator's training.")
    try:
        with transaction.atomic():
            locked = (  # the augmentation's row only: the federation's row stays free for jobs
                Augmentation.objects.select_for_update(of=("self",))
                .select_related("federation")
                .get(id=augmentation.id)
            )
            if locked.status != AugmentationStatus.COLLECTING:
                raise Conflict(
                    f"Augmentation #{locked.id} was already started ({locked.get_status_display()})."
                )
            uploads = list(locked.seeds.values_list("organisation_id", "labels"))
            if not uploads:
                raise Conflict(f"No silo has uploaded seeds to augmentation #{locked.id} yet.")
            augmentation_workload_check(locked, n_seeds=sum(len(labels) for _, labels in uploads))
            if locked.private:
                _reserve(locked, uploads, actor)
            locked.status = AugmentationStatus.QUEUED
            locked.started_at = timezone.now()
            locked.save(
                update_fields=["status", "started_at", "privacy_parameters", "privacy_report"]
            )
            outbox_add(AugmentationOutbox(augmentation_id=locked.id))
            audit_record(
                action="augmentation.started",
                actor=actor,
                target=locked,
                request=request,
                details={
                    "silos": len(uploads),
                    "epsilon": (locked.privacy_report or {}).get("epsilon"),
                },
            )
    except BudgetExceeded as error:
        budget_refusal_record(error=error, actor=actor, target=augmentation, request=request)
        raise
    return locked


def augmentation_workload_check(augmentation: Augmentation, *, n_seeds: int) -> float:
    """Refuse a training whose estimated work on ``n_seeds`` pooled seeds exceeds ``ONEFOLD_FAUG_MAX_WORK`` (as
    :func:`market.jobs.parameters.job_workload_check` refuses a job's); the estimated work otherwise."""
    public_rows = augmentation.public_dataset.n_rows if augmentation.public_dataset else 0
    work = generator_training_work(
        n_seeds=n_seeds,
        n_features=augmentation.n_features,
        n_classes=augmentation.federation.n_classes,
        epochs=augmentation.epochs,
        batch_size=augmentation.batch_size,
        private=augmentation.private,
        tabular=augmentation.generator == GeneratorKind.CTGAN,
        n_public=public_rows,
    )
    limit = settings.ONEFOLD_FAUG_MAX_WORK
    if work > limit:
        raise InvalidInput(
            f"Training this generator on the {n_seeds} pooled seeds would need about {work:.3g} row-passes of "
            f"work ({augmentation.epochs} epochs in batches of {augmentation.batch_size}: every step costs "
            f"a fixed amount besides its rows), above this market's limit of {limit:.3g}; cancel it and open "
            "one with fewer epochs or larger batches."
        )
    return work


def augmentation_cancel(*, augmentation: Augmentation, actor: User, request=None) -> Augmentation:
    """Cancel an augmentation that has not started training at once (releasing any reservation); ask a training
    one to stop (its worker stops at its next step, then releases: nothing was published, nothing is charged)."""
    if not actor.is_operator:
        raise PermissionDenied("Only operators cancel a federated augmentation.")
    with transaction.atomic():
        locked = Augmentation.objects.select_for_update().get(id=augmentation.id)
        if locked.status in (
            AugmentationStatus.PUBLISHED,
            AugmentationStatus.FAILED,
            AugmentationStatus.CANCELLED,
        ):
            raise Conflict(
                f"Augmentation #{locked.id} is already {locked.status}; there is nothing to cancel."
            )
        if (
            locked.cancel_requested_at is not None
        ):  # asked again (a resubmitted form): the first request stands
            return locked
        status_when_cancelled = locked.status
        if locked.status == AugmentationStatus.TRAINING:
            locked.cancel_requested_at = timezone.now()
            locked.save(update_fields=["cancel_requested_at"])
        else:
            locked.status, locked.finished_at = AugmentationStatus.CANCELLED, timezone.now()
            locked.status_reason = f"Cancelled by {actor.username} before training."
            locked.save(update_fields=["status", "finished_at", "status_reason"])
            augmentation_budget_release(augmentation=locked)
        audit_record(
            action="augmentation.cancelled",
            actor=actor,
            target=locked,
            request=request,
            details={"status_when_cancelled": status_when_cancelled},
        )
    return locked


def _reserve(augmentation: Augmentation, uploads: list, actor: User) -> None:
    n_examples = sum(len(labels) for _, labels in uploads)
    try:
        parameters = augmentation_privacy(augmentation, n_examples=n_examples)
    except ValueError as error:
        raise InvalidInput(f"The DP discriminator cannot run as configured: {error}") from error
    report, _ = dp_sgd_privacy_bound(parameters)
    augmentation.privacy_parameters = {**parameters.as_declaration(), "n_examples": n_examples}
    augmentation.privacy_report = report.as_dict()
    augmentation_budget_reserve(augmentation=augmentation, actor=actor)
