from django.db.models import Case, Count, Exists, OuterRef, QuerySet, When

from market.accounts.models import User
from market.errors import NotFound, PermissionDenied
from market.federations.models import (
    EvaluationSplit,
    Federation,
    JoinRequest,
    JoinRequestStatus,
    Membership,
    PublicDataset,
)


def federation_list(*, user: User) -> QuerySet[Federation]:
    """Every federation, each marked ``is_member`` and ``join_requested`` (a request waits) for the user's
    organisation."""
    memberships = Membership.objects.filter(
        federation=OuterRef("pk"), organisation_id=user.organisation_id
    )
    pending = JoinRequest.objects.filter(
        federation=OuterRef("pk"),
        organisation_id=user.organisation_id,
        status=JoinRequestStatus.PENDING,
    )
    return Federation.objects.annotate(
        is_member=Exists(memberships), join_requested=Exists(pending)
    )


def federations_joined(*, user: User) -> QuerySet[Federation]:
    """The federations the user's organisation is a member of, marked as ``federation_list`` marks them."""
    return federation_list(user=user).filter(is_member=True)


def federation_names() -> QuerySet:
    """Every federation's (slug, name), by name: the choices of a filter by federation."""
    return Federation.objects.order_by("name").values_list("slug", "name")


def federations_by_name() -> QuerySet[Federation]:
    """Every federation, by name (the operator's forms choose one)."""
    return Federation.objects.order_by("name")


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


def require_operator(user: User, action: str) -> None:
    if not user.is_operator:
        raise PermissionDenied(f"Only market operators can {action}.")


def join_request_list(*, federation: Federation, user: User) -> QuerySet[JoinRequest]:
    """Operators: the federation's join requests, pending ones first, newest first."""
    require_operator(user, "see join requests")
    waiting_first = Case(When(status=JoinRequestStatus.PENDING, then=0), default=1)
    return federation.join_requests.select_related(
        "organisation", "requested_by", "federation"
    ).order_by(waiting_first, "-created_at", "-id")


def join_requests_pending(*, federation: Federation, user: User) -> QuerySet[JoinRequest]:
    """Operators: the federation's join requests that wait to be admitted or refused."""
    return join_request_list(federation=federation, user=user).filter(
        status=JoinRequestStatus.PENDING
    )


def join_requests_waiting(*, user: User) -> list[dict]:
    """Operators: the federations with join requests waiting for a decision, ``{"federation", "count"}`` each, the
    most waiting first (the overview lists what waits for the operator)."""
    require_operator(user, "see join requests")
    waiting = (
        JoinRequest.objects.filter(status=JoinRequestStatus.PENDING)
        .values("federation__slug", "federation__name")
        .annotate(count=Count("id"))
        .order_by("-count", "federation__name")
    )
    return [
        {"slug": row["federation__slug"], "name": row["federation__name"], "count": row["count"]}
        for row in waiting
    ]


def join_request_latest_refusal(*, federation: Federation, user: User) -> JoinRequest | None:
    """The user's organisation's latest request to this federation if an operator refused it (the page says why)."""
    if user.organisation_id is None:
        return None
    latest = federation.join_requests.filter(organisation_id=user.organisation_id).first()
    return latest if latest is not None and latest.status == JoinRequestStatus.REFUSED else None


def member_list(*, federation: Federation, user: User) -> QuerySet[Membership]:
    """Operators: the federation's members, by organisation name."""
    require_operator(user, "see a federation's members")
    return (
        Membership.objects.filter(federation=federation)
        .select_related("organisation")
        .order_by("organisation__name")
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
