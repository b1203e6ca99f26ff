"""Bringing organisations and people in without the admin site.

An operator makes an invitation: a new organisation (silo, buyer or both) with its first person, or a person in an
existing organisation, optionally into a federation. The market answers with a link holding a random token, shown
once; only the token's SHA-256 is stored. Whoever opens the link before it expires chooses a username and a
password (Django's password validators decide which are acceptable) and is signed in; the invitation is then used
up, and a named federation has the organisation as a member. Every step is audited.
"""

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.accounts.services import organisation_create, user_create
from market.audit.services import audit_record
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from market.federations.membership import membership_add
from market.federations.models import Federation
from market.invitations.models import Invitation, InvitationKind
from market.invitations.selectors import invitation_for_token, invitation_token_hash

#: The longest an invitation link may stay usable.
INVITATION_MAX_DAYS = 30


def _expiry(expires_in_days: int | None) -> timezone.datetime:
    days = settings.ONEFOLD_INVITATION_DAYS if expires_in_days is None else expires_in_days
    if not 1 <= days <= INVITATION_MAX_DAYS:
        raise InvalidInput(
            f"An invitation stays usable for 1 to {INVITATION_MAX_DAYS} days, not {days}.",
            field="expires_in_days",
        )
    return timezone.now() + timedelta(days=days)


def _invited_organisation(
    *, kind: str, organisation_name: str, is_silo: bool, is_buyer: bool, organisation_id: int | None
) -> tuple[str, bool, Organisation | None]:
    """(name, is_silo, organisation) of whom the invitation brings in; a sentence naming the field otherwise."""
    if kind == InvitationKind.ORGANISATION:
        name = organisation_name.strip()
        if not name or len(name) > 200:
            raise InvalidInput(
                "Name the new organisation (1 to 200 characters).", field="organisation_name"
            )
        if not (is_silo or is_buyer):
            raise InvalidInput(
                "Say whether the new organisation is a silo, a buyer or both.", field="is_silo"
            )
        if Organisation.objects.filter(name__iexact=name).exists():
            raise Conflict(
                f"An organisation called {name!r} already exists; invite a person into it instead."
            )
        return name, is_silo, None
    if kind == InvitationKind.PERSON:
        organisation = Organisation.objects.filter(id=organisation_id).first()
        if organisation is None:
            raise InvalidInput("Choose the organisation the person joins.", field="organisation_id")
        return organisation.name, organisation.is_silo, organisation
    raise InvalidInput(
        f"'kind' must be one of {', '.join(InvitationKind.values)}, not {kind!r}.", field="kind"
    )


def invitation_create(
    *,
    user: User,
    kind: str,
    organisation_name: str = "",
    is_silo: bool = False,
    is_buyer: bool = False,
    organisation_id: int | None = None,
    federation: Federation | None = None,
    email: str = "",
    expires_in_days: int | None = None,
    request=None,
) -> tuple[Invitation, str]:
    """A new invitation (audited) and its token, which is never stored and cannot be shown again."""
    if not user.is_operator:
        raise PermissionDenied("Only market operators can invite organisations and people.")
    name, silo, organisation = _invited_organisation(
        kind=kind,
        organisation_name=organisation_name,
        is_silo=is_silo,
        is_buyer=is_buyer,
        organisation_id=organisation_id,
    )
    if federation is not None and not silo:
        raise InvalidInput(
            f"{name} is not a silo; only silos can be invited into a federation.",
            field="federation",
        )
    email = email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise InvalidInput(f"{email!r} is not an e-mail address.", field="email") from None
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            kind=kind,
            organisation_name=name if organisation is None else "",
            is_silo=is_silo if organisation is None else False,
            is_buyer=is_buyer if organisation is None else False,
            organisation=organisation,
            federation=federation,
            email=email,
            token_hash=invitation_token_hash(token),
            expires_at=_expiry(expires_in_days),
            created_by=user,
        )
        audit_record(
            action="invitation.created",
            actor=user,
            target=invitation,
            request=request,
            details={
                "kind": kind,
                "organisation": name,
                "federation": federation.slug if federation else None,
                "expires_at": invitation.expires_at.isoformat(),
            },
        )
    return invitation, token


@transaction.atomic
def invitation_revoke(*, invitation_id: int, user: User, request=None) -> Invitation:
    """Withdraw an unused invitation: its link stops working. Revoking twice changes nothing."""
    if not user.is_operator:
        raise PermissionDenied("Only market operators can withdraw invitations.")
    invitation = Invitation.objects.select_for_update().filter(id=invitation_id).first()
    if invitation is None:
        raise NotFound(f"There is no invitation #{invitation_id}.")
    if invitation.accepted_at is not None:
        raise Conflict(f"Invitation #{invitation_id} was already accepted; it cannot be withdrawn.")
    if invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        audit_record(action="invitation.revoked", actor=user, target=invitation, request=request)
    return invitation


def _checked_credentials(*, username: str, password: str) -> str:
    username = username.strip()
    try:
        if not username or len(username) > 150:
            raise ValidationError("A username has 1 to 150 characters.")
        User.username_validator(username)
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages), field="username") from None
    if User.objects.filter(username__iexact=username).exists():
        raise Conflict(f"The username {username!r} is taken; choose another.")
    try:
        validate_password(password, user=User(username=username))
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages), field="password") from None
    return username


@transaction.atomic
def invitation_accept(*, token: str, username: str, password: str, request) -> User:
    """Use the invitation: create the person (and the organisation), make it a member of the named federation,
    and return the new user (the page signs them in; the API answers an API token)."""
    invitation = invitation_for_token(token=token, request=request, for_update=True)
    username = _checked_credentials(username=username, password=password)
    organisation = invitation.organisation
    if organisation is None:
        organisation = organisation_create(
            name=invitation.organisation_name,
            is_silo=invitation.is_silo,
            is_buyer=invitation.is_buyer,
        )
    person = user_create(username=username, password=password, organisation=organisation)
    invitation.organisation = organisation
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = person
    invitation.save(update_fields=["organisation", "accepted_at", "accepted_by"])
    audit_record(
        action="invitation.accepted",
        actor=person,
        target=invitation,
        request=request,
        details={
            "kind": invitation.kind,
            "organisation": organisation.name,
            "username": username,
            "invited_by": invitation.created_by.username,
        },
    )
    if invitation.federation is not None:
        membership_add(
            federation=invitation.federation,
            organisation=organisation,
            actor=person,
            via="invitation",
            request=request,
        )
    return person
