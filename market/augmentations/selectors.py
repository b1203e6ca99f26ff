from dataclasses import dataclass

import numpy as np
from django.db.models import F, QuerySet, Sum

from market.accounts.models import User
from market.augmentations.models import Augmentation, AugmentationStatus
from market.errors import Conflict, NotFound
from market.federations.models import Federation, Membership
from market.storage import artifact_read
from workers.algorithms.faug.leakage import device_server_leakage, inter_device_leakage


@dataclass(frozen=True)
class SeedSummary:
    """One silo's seeds as others may see them: counts and the two leakages, never the rows. Target labels only
    for the silo's own upload. ``n_pooled`` counts every silo's seeds so far (the generator's training set once
    training has started); ``inter_device_leakage`` is what the other members learn from the generator."""

    organisation: str
    n_seeds: int
    n_target: int
    n_redundant: int
    leakage: float
    n_pooled: int
    inter_device_leakage: float
    target_labels: list[int] | None


def augmentation_list(*, user: User, federation: Federation | None = None) -> QuerySet:
    """Operators see every augmentation; a silo those of its federations (only ``federation``'s, where given)."""
    augmentations = Augmentation.objects.select_related("federation")
    if federation is not None:
        augmentations = augmentations.filter(federation=federation)
    if user.is_operator:
        return augmentations
    federations = Membership.objects.filter(organisation_id=user.organisation_id).values(
        "federation_id"
    )
    return augmentations.filter(federation_id__in=federations)


def augmentation_get(*, augmentation_id: int, user: User) -> Augmentation:
    augmentation = augmentation_list(user=user).filter(id=augmentation_id).first()
    if augmentation is None:
        raise NotFound(f"There is no augmentation #{augmentation_id}.")
    return augmentation


def seed_summaries(*, augmentation: Augmentation, user: User) -> list[SeedSummary]:
    """Operators see every silo's counts; a silo only its own upload (with its target labels) and the pooled
    count its inter-device leakage is a share of."""
    uploads = augmentation.seeds.select_related("organisation").order_by("id")
    n_pooled = uploads.aggregate(n=Sum(F("n_target") + F("n_redundant")))["n"] or 0
    if not user.is_operator:
        uploads = uploads.filter(organisation_id=user.organisation_id)
    return [
        SeedSummary(
            organisation=upload.organisation.name,
            n_seeds=upload.n_target + upload.n_redundant,
            n_target=upload.n_target,
            n_redundant=upload.n_redundant,
            leakage=device_server_leakage(upload.n_target, upload.n_redundant),
            n_pooled=n_pooled,
            inter_device_leakage=inter_device_leakage(upload.n_target, n_pooled),
            target_labels=upload.target_labels
            if upload.organisation_id == user.organisation_id
            else None,
        )
        for upload in uploads
    ]


def generator_download(*, augmentation: Augmentation, user: User) -> bytes:
    """The published generator's safetensors bytes, for members and operators."""
    if augmentation.status != AugmentationStatus.PUBLISHED:
        raise Conflict(
            f"Augmentation #{augmentation.id} has no published generator yet "
            f"({augmentation.get_status_display()})."
        )
    return artifact_read(augmentation.generator_file)


def augmentation_for_training(*, augmentation_id: int) -> Augmentation:
    """The claimed augmentation with its federation, for the worker that trains it."""
    return Augmentation.objects.select_related("federation").get(id=augmentation_id)


def augmentation_still_training(*, augmentation_id: int) -> bool:
    """Whether the row still trains with no cancel asked (the reaper may have ended it)."""
    return Augmentation.objects.filter(
        id=augmentation_id,
        status=AugmentationStatus.TRAINING,
        cancel_requested_at__isnull=True,
    ).exists()


def augmentation_seeds(*, augmentation: Augmentation) -> tuple[np.ndarray, np.ndarray]:
    """The pooled seeds: features (n, n_features) float32 and labels (n,) int64, in upload order."""
    uploads = list(augmentation.seeds.order_by("id"))
    features = [
        np.frombuffer(bytes(upload.features), dtype=np.float32).reshape(-1, augmentation.n_features)
        for upload in uploads
    ]
    labels = [np.asarray(upload.labels, dtype=np.int64) for upload in uploads]
    return np.concatenate(features), np.concatenate(labels)
