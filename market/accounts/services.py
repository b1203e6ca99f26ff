import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import authenticate
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from market.accounts.models import ApiToken, Organisation, User
from market.accounts.selectors import api_token_hash
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.client_address import client_address_of
from market.errors import Conflict, DomainError, InvalidInput, NotFound


@transaction.atomic
def organisation_create(*, name: str, is_silo: bool = True, is_buyer: bool = False) -> Organisation:
    if Organisation.objects.filter(name__iexact=name).exists():
        raise Conflict(f"An organisation called {name!r} already exists; choose another name.")
    return Organisation.objects.create(name=name, is_silo=is_silo, is_buyer=is_buyer)


@transaction.atomic
def user_create(
    *,
    username: str,
    password: str,
    organisation: Organisation | None = None,
    is_operator: bool = False,
) -> User:
    if User.objects.filter(username=username).exists():
        raise Conflict(f"A user called {username!r} already exists; choose another username.")
    # Operators administer the whole market, in the admin site too.
    return User.objects.create_user(
        username=username,
        password=password,
        organisation=organisation,
        is_staff=is_operator,
        is_superuser=is_operator,
    )


# --- API tokens ---


def _token_expiry(expires_in_days: int | None) -> timezone.datetime:
    days = settings.ONEFOLD_TOKEN_DEFAULT_DAYS if expires_in_days is None else expires_in_days
    if not 1 <= days <= settings.ONEFOLD_TOKEN_MAX_DAYS:
        raise InvalidInput(
            f"A token lives between 1 and {settings.ONEFOLD_TOKEN_MAX_DAYS} days, not {days}."
        )
    return timezone.now() + timedelta(days=days)


def api_token_create(
    *, user: User, name: str, expires_in_days: int | None = None, request=None
) -> tuple[ApiToken, str]:
    """Create a named token; returns the row and the key, which is never stored and cannot be shown again."""
    name = name.strip()
    if not name:
        raise InvalidInput(
            "Give the token a name that says where it is used, e.g. 'hospital training server'."
        )
    key = secrets.token_hex(20)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name[:100],
            key_hash=api_token_hash(key),
            key_prefix=key[:8],
            expires_at=_token_expiry(expires_in_days),
        )
        audit_record(
            action="token.created",
            actor=user,
            target=token,
            request=request,
            details={"name": token.name, "expires_at": token.expires_at.isoformat()},
        )
    return token, key


def api_token_revoke(*, user: User, token_id: int, request=None) -> ApiToken:
    """Revoke one of the user's own tokens; it stops working on the next request. Revoking twice changes nothing."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(id=token_id, user=user).first()
        if token is None:  # another user's token is as invisible as one that does not exist
            raise NotFound(f"You have no token with id {token_id}.")
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_record(
                action="token.revoked",
                actor=user,
                target=token,
                request=request,
                details={"name": token.name},
            )
    return token


LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_token_mark_used(*, token: ApiToken) -> None:
    """Record the token's use, at most once a minute so that reads do not each cost a write."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(id=token.id).update(last_used_at=now)
        token.last_used_at = now


def user_token(*, user: User) -> str:
    """A fresh API token for the user (named 'default'); returns its key."""
    return api_token_create(user=user, name="default")[1]


# --- sign-in limits (a cache counter per account and per client address) ---


class SignInLocked(DomainError):
    status_code = 429

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        minutes = max(1, round(retry_after / 60))
        super().__init__(
            f"Too many failed sign-ins; try again in {minutes} minute{'s' if minutes != 1 else ''}."
        )


def _signin_keys(*, username: str, address: str | None) -> list[tuple[str, int]]:
    """(cache key, the most failures allowed) for the account and for the client address."""
    keys = [
        (
            f"signin-failures:account:{hashlib.sha256(username.lower().encode()).hexdigest()}",
            settings.ONEFOLD_SIGNIN_MAX_FAILURES,
        )
    ]
    if address:
        keys.append(
            (f"signin-failures:address:{address}", settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS)
        )
    return keys


def signin_check_allowed(*, username: str, request) -> None:
    """Raise SignInLocked while the account or the address has used up its failed attempts for the window."""
    now = timezone.now().timestamp()
    for key, limit in _signin_keys(username=username, address=client_address_of(request)):
        failures, window_ends = cache.get(key, (0, now))
        if failures >= limit and window_ends > now:
            audit_record(
                action="auth.sign_in_locked",
                outcome=AuditOutcome.REFUSED,
                request=request,
                details={
                    "username": username[:150],
                    "limit": "account" if ":account:" in key else "address",
                },
            )
            raise SignInLocked(retry_after=int(window_ends - now) + 1)


def signin_failure_record(*, username: str, request) -> None:
    """Count a failed sign-in against the account and the address; the window starts at the first failure."""
    now = timezone.now().timestamp()
    window = settings.ONEFOLD_SIGNIN_WINDOW_SECONDS
    for key, _ in _signin_keys(username=username, address=client_address_of(request)):
        failures, window_ends = cache.get(key, (0, now + window))
        if window_ends <= now:
            failures, window_ends = 0, now + window
        cache.set(key, (failures + 1, window_ends), timeout=int(window_ends - now) + 1)
    audit_record(
        action="auth.sign_in",
        outcome=AuditOutcome.REFUSED,
        request=request,
        details={"username": username[:150]},
    )


def signin_success_record(*, user: User, request, via: str) -> None:
    """A good password clears the account's failures (not the address's: one address may try many accounts)."""
    cache.delete(_signin_keys(username=user.get_username(), address=None)[0][0])
    audit_record(action="auth.sign_in", actor=user, request=request, details={"via": via})


def api_sign_in(
    *, username: str, password: str, request, token_name: str = ""
) -> tuple[ApiToken, str]:
    """Exchange a password for a new named API token, within the sign-in limits."""
    signin_check_allowed(username=username, request=request)
    user = authenticate(
        request=request, username=username, password=password
    )  # a failure is counted by the signal
    if user is None:
        raise InvalidInput("Unable to log in with provided credentials.")
    signin_success_record(user=user, request=request, via="api")
    return api_token_create(
        user=user,
        name=token_name or f"signed in {timezone.now():%Y-%m-%d %H:%M} UTC",
        request=request,
    )
