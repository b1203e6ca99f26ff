import hashlib

from django.conf import settings
from django.core.cache import cache
from django.db.models import QuerySet
from django.utils import timezone

from market.accounts.models import User
from market.client_address import client_address_of
from market.errors import DomainError, Gone, NotFound, PermissionDenied
from market.invitations.models import Invitation
from market.rate_limit import Rate, rates_take


class InvitationLookupsLimited(DomainError):
    status_code = 429

    def __init__(self, retry_after: float):
        self.retry_after = max(1, round(retry_after))
        super().__init__(
            f"Too many invitation links opened from your address; try again in "
            f"{max(1, round(retry_after / 60))} minute(s)."
        )


def invitation_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_state(invitation: Invitation) -> str:
    if invitation.accepted_at is not None:
        return "accepted"
    if invitation.revoked_at is not None:
        return "revoked"
    return "expired" if invitation.expires_at <= timezone.now() else "open"


def invitation_list(*, user: User) -> QuerySet[Invitation]:
    if not user.is_operator:
        raise PermissionDenied("Only market operators can see invitations.")
    return Invitation.objects.select_related("organisation", "federation", "accepted_by")


def _lookup_allowed(request) -> None:
    """Each address opens a bounded number of invitation links an hour: a token cannot be guessed by trying."""
    address = client_address_of(request) or "unknown"
    rate = Rate(
        key=f"invitation-lookups:{address}",
        count=settings.ONEFOLD_INVITATION_LOOKUPS_PER_HOUR,
        period_seconds=3600,
    )
    wait = rates_take(cache=cache, rates=[rate], now=timezone.now().timestamp())
    if wait > 0:
        raise InvitationLookupsLimited(retry_after=wait)


def invitation_for_token(*, token: str, request, for_update: bool = False) -> Invitation:
    """The open invitation the link's token stands for, or a sentence saying why the link does not work: 404 for
    a token that was never made, 410 for one accepted, revoked or expired; 429 past the address's lookups."""
    _lookup_allowed(request)
    invitations = Invitation.objects.select_related("organisation", "federation")
    if for_update:
        invitations = invitations.select_for_update(of=("self",))
    invitation = invitations.filter(token_hash=invitation_token_hash(token[:200])).first()
    if invitation is None:
        raise NotFound(
            "This invitation link is not one the market made; check that you copied all of it."
        )
    state = invitation_state(invitation)
    if state == "accepted":
        raise Gone(
            "This invitation was already used; sign in with the username and password chosen then."
        )
    if state == "revoked":
        raise Gone("This invitation was withdrawn; ask the market's operator for a new one.")
    if state == "expired":
        raise Gone(
            f"This invitation expired on {invitation.expires_at:%Y-%m-%d %H:%M} UTC; ask the market's "
            "operator for a new one."
        )
    return invitation
