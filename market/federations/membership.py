"""Who belongs to a federation, and how an organisation comes in and goes out.

A federation's membership policy decides whether a silo may join by itself: ``open`` (it joins at once), ``request``
(the default: its join request waits for an operator to admit or refuse it) or ``invitation`` (it joins only by
accepting an operator's invitation, market.invitations). Every change is audited.

Removing a member deletes its membership row only. What the organisation did while it was a member stays: its
submissions (and their files), the jobs that used them and the global models they made, its privacy budget with
every ledger entry (so re-admitting it later starts from the ε it has already spent), its wallet and earnings.
A removed organisation can no longer download the public data, upload, join exchanges, or have its submissions
chosen for a new job (market.jobs.services); jobs already queued run as they were launched.
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.services import audit_record, audit_refusals
from market.errors import Conflict, NotFound, PermissionDenied
from market.federations.models import (
    Federation,
    JoinRequest,
    JoinRequestStatus,
    Membership,
    MembershipPolicy,
)
from market.federations.selectors import require_operator


@dataclass(frozen=True)
class JoinOutcome:
    """What asking to join did: ``membership`` once the organisation is a member, otherwise its pending
    ``join_request``; ``created`` when this call made the row (a second ask changes nothing)."""

    membership: Membership | None
    join_request: JoinRequest | None
    created: bool


def membership_add(
    *, federation: Federation, organisation: Organisation, actor: User, via: str, request=None
) -> tuple[Membership, bool]:
    """Make the organisation a member (audited with how: "open", "admitted", "invitation"); a member already
    stays one. Returns (membership, created)."""
    # get_or_create survives a concurrent join: it catches the unique constraint's error and reads the winner's row.
    membership, created = Membership.objects.get_or_create(
        federation=federation, organisation=organisation
    )
    if created:
        audit_record(
            action="membership.joined",
            actor=actor,
            organisation=organisation,
            target=membership,
            request=request,
            details={"federation": federation.slug, "organisation": organisation.name, "via": via},
        )
    return membership, created


@audit_refusals("membership.joined", target_argument="federation")
@transaction.atomic
def federation_join(*, federation: Federation, user: User, request=None) -> JoinOutcome:
    """A silo asks to join: it becomes a member of an open federation, or its request waits for an operator in a
    "by request" one; an "by invitation" federation refuses, saying how to get in."""
    organisation = user.organisation
    if organisation is None or not organisation.is_silo:
        raise PermissionDenied("Only members of a silo organisation can join a federation.")
    member = Membership.objects.filter(federation=federation, organisation=organisation).first()
    if member is not None:
        return JoinOutcome(membership=member, join_request=None, created=False)
    if federation.membership_policy == MembershipPolicy.OPEN:
        membership, created = membership_add(
            federation=federation,
            organisation=organisation,
            actor=user,
            via="open",
            request=request,
        )
        return JoinOutcome(membership=membership, join_request=None, created=created)
    if federation.membership_policy == MembershipPolicy.INVITATION:
        raise PermissionDenied(
            f"'{federation.slug}' admits members by invitation only; ask the market's operator to invite "
            f"{organisation.name}."
        )
    join_request, created = JoinRequest.objects.get_or_create(
        federation=federation,
        organisation=organisation,
        status=JoinRequestStatus.PENDING,
        defaults={"requested_by": user},
    )
    if created:
        audit_record(
            action="membership.requested",
            actor=user,
            target=join_request,
            request=request,
            details={"federation": federation.slug},
        )
    return JoinOutcome(membership=None, join_request=join_request, created=created)


def _pending_request(join_request_id: int) -> JoinRequest:
    join_request = (
        JoinRequest.objects.select_for_update()
        .select_related("federation", "organisation")
        .filter(id=join_request_id)
        .first()
    )
    if join_request is None:
        raise NotFound(f"There is no join request #{join_request_id}.")
    if join_request.status != JoinRequestStatus.PENDING:
        raise Conflict(
            f"{join_request.organisation.name}'s request to join {join_request.federation.name} was already "
            f"{join_request.status}."
        )
    return join_request


def _decide(join_request: JoinRequest, *, status: str, user: User, reason: str = "") -> None:
    join_request.status = status
    join_request.decided_by = user
    join_request.decided_at = timezone.now()
    join_request.reason = reason
    join_request.save(update_fields=["status", "decided_by", "decided_at", "reason"])


@audit_refusals("membership.admitted")
@transaction.atomic
def join_request_admit(*, join_request_id: int, user: User, request=None) -> JoinRequest:
    """The operator admits a pending request: its organisation becomes a member."""
    require_operator(user, "admit members")
    join_request = _pending_request(join_request_id)
    _decide(join_request, status=JoinRequestStatus.ADMITTED, user=user)
    audit_record(
        action="membership.admitted",
        actor=user,
        organisation=join_request.organisation,
        target=join_request,
        request=request,
        details={"federation": join_request.federation.slug},
    )
    membership_add(
        federation=join_request.federation,
        organisation=join_request.organisation,
        actor=user,
        via="admitted",
        request=request,
    )
    return join_request


@audit_refusals("membership.refused")
@transaction.atomic
def join_request_refuse(
    *, join_request_id: int, user: User, reason: str = "", request=None
) -> JoinRequest:
    """The operator refuses a pending request, with a reason the silo sees; the silo may ask again later."""
    require_operator(user, "refuse join requests")
    join_request = _pending_request(join_request_id)
    _decide(join_request, status=JoinRequestStatus.REFUSED, user=user, reason=reason.strip()[:500])
    audit_record(
        action="membership.refused",
        actor=user,
        organisation=join_request.organisation,
        target=join_request,
        request=request,
        details={"federation": join_request.federation.slug, "reason": join_request.reason},
    )
    return join_request


@audit_refusals("membership.removed", target_argument="federation")
@transaction.atomic
def membership_remove(
    *, federation: Federation, organisation_id: int, user: User, request=None
) -> Organisation:
    """The operator removes a member (see this module's docstring for what it keeps); returns the organisation."""
    require_operator(user, "remove members")
    membership = (
        Membership.objects.select_for_update()
        .select_related("organisation")
        .filter(federation=federation, organisation_id=organisation_id)
        .first()
    )
    if membership is None:
        raise NotFound(f"Organisation #{organisation_id} is not a member of '{federation.slug}'.")
    organisation = membership.organisation
    audit_record(
        action="membership.removed",
        actor=user,
        organisation=organisation,
        target=membership,
        request=request,
        details={
            "federation": federation.slug,
            "organisation": organisation.name,
            "joined_at": membership.joined_at.isoformat(),
        },
    )
    membership.delete()
    return organisation
