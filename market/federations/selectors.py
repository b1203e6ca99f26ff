from django.db.models import Exists, OuterRef, QuerySet

from market.accounts.models import User
from market.errors import NotFound, PermissionDenied
from market.federations.models import EvaluationSplit, Federation, Membership, PublicDataset


def federation_list(*, user: User) -> QuerySet[Federation]:
    """Every federation, each marked ``is_member`` for the user's organisation."""
    memberships = Membership.objects.filter(
        federation=OuterRef("pk"), organisation_id=user.organisation_id
    )
    return Federation.objects.annotate(is_member=Exists(memberships))


def federation_get(*, slug: str, user: User) -> Federation:
    federation = federation_list(user=user).filter(slug=slug).first()
    if federation is None:
        raise NotFound(f"There is no federation '{slug}'.")
    return federation


def federation_is_member(*, federation: Federation, user: User) -> bool:
    return (
        user.organisation_id is not None
        and Membership.objects.filter(
            federation=federation, organisation_id=user.organisation_id
        ).exists()
    )


def federation_require_member(*, federation: Federation, user: User, advice: str = "") -> None:
    """Operators and members pass; anyone else is told to join first (and ``advice``, where there is another way)."""
    if not (user.is_operator or federation_is_member(federation=federation, user=user)):
        raise PermissionDenied(
            f"Your organisation is not a member of '{federation.slug}'; join it first.{advice}"
        )


def public_dataset_current(*, federation: Federation) -> PublicDataset:
    public_dataset = federation.public_datasets.first()
    if public_dataset is None:
        raise NotFound(f"The federation '{federation.slug}' has no public dataset yet.")
    return public_dataset


def evaluation_split_current(*, federation: Federation, user: User) -> EvaluationSplit:
    if not user.is_operator:
        raise PermissionDenied("Only market operators can read evaluation splits.")
    split = federation.evaluation_splits.first()
    if split is None:
        raise NotFound(f"The federation '{federation.slug}' has no evaluation split yet.")
    return split
