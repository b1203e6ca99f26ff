import contextlib
import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.password_validation import validate_password
from django.core.cache import cache
from django.core.exceptions import ValidationError
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


@transaction.atomic
def operator_first_create(*, username: str, password: str, organisation_name: str) -> User:
    """The market's first operator, in an organisation of its own (neither silo nor buyer), on an empty market.

    Refused once any operator exists: further operators come from an operator, not from a shell. The password
    must pass the project's password validators."""
    existing = User.objects.filter(is_staff=True).order_by("id").first()
    if existing is not None:
        raise Conflict(
            f"This market already has an operator ({existing.username}); sign in as an operator to invite "
            "more people on the People page."
        )
    username = username.strip()
    if not username:
        raise InvalidInput("Give the operator a username, e.g. --username operator.")
    try:
        validate_password(password, User(username=username))
    except ValidationError as error:
        raise InvalidInput(f"Choose another password: {' '.join(error.messages)}") from None
    organisation = organisation_create(name=organisation_name, is_silo=False, is_buyer=False)
    operator = user_create(
        username=username, password=password, organisation=organisation, is_operator=True
    )
    audit_record(action="operator.first_created", actor=operator, target=operator)
    return operator


# --- API tokens ---


def _token_expiry(expires_in_days: int | None) -> timezone.datetime:
    days = settings.ONEFOLD_TOKEN_DEFAULT_DAYS if expires_in_days is None else expires_in_days
    if not 1 <= days <= settings.ONEFOLD_TOKEN_MAX_DAYS:
        raise InvalidInput(
            f"A token lives between 1 and {settings.ONEFOLD_TOKEN_MAX_DAYS} days, not {days}.",
            field="expires_in_days",
        )
    return timezone.now() + timedelta(days=days)


def api_token_create(
    *,
    user: User,
    name: str,
    expires_in_days: int | None = None,
    predict_global_model_id: int | None = None,
    request=None,
) -> tuple[ApiToken, str]:
    """Create a named token; returns the row and the key, which is never stored and cannot be shown again.
    ``predict_global_model_id``: a token that calls only that model's predict endpoint (predictions-only purchases).
    """
    name = name.strip()
    if not name:
        raise InvalidInput(
            "Give the token a name that says where it is used, e.g. 'hospital training server'.",
            field="name",
        )
    key = secrets.token_hex(20)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name[:100],
            key_hash=api_token_hash(key),
            key_prefix=key[:8],
            expires_at=_token_expiry(expires_in_days),
            predict_global_model_id=predict_global_model_id,
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


# --- sign-in limits (cache counters per account and address, per account, per address) ---
#
# Three counters, each for a window that starts at its first count (a right password gives its attempt back):
# - the account from this address (ONEFOLD_SIGNIN_MAX_FAILURES): past it, that account is refused from that
#   address before its password is checked, the right one included — one address cannot brute-force it;
# - the account from anywhere (ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT, higher): the same, from every address —
#   many addresses cannot brute-force it either;
# - the address (ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS): past it, every wrong password and unknown name from
#   that address is answered as locked, but a right password for an account not itself locked still signs in —
#   guessing names from an address cannot lock a known user out of it.


class SignInLocked(DomainError):
    status_code = 429

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        minutes = max(1, round(retry_after / 60))
        super().__init__(
            f"Too many failed sign-ins; try again in {minutes} minute{'s' if minutes != 1 else ''}."
        )


@dataclass(frozen=True)
class _SignInCounter:
    key: str
    limit: int


def _signin_counters(*, username: str, address: str | None) -> dict[str, _SignInCounter]:
    """The counters by name (the audit log's): the account's from anywhere, and with an address the account's
    from that address and the address's."""
    account = hashlib.sha256(username.lower().encode()).hexdigest()
    counters = {
        "account": _SignInCounter(
            f"signin-failures:account:{account}",
            settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT,
        )
    }
    if address:
        counters["account from address"] = _SignInCounter(
            f"signin-failures:account:{account}:address:{address}",
            settings.ONEFOLD_SIGNIN_MAX_FAILURES,
        )
        counters["address"] = _SignInCounter(
            f"signin-failures:address:{address}", settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS
        )
    return counters


def _signin_count(counter: _SignInCounter) -> tuple[int, float]:
    """Add one to the counter in one atomic increment, so that concurrent attempts are all counted; returns the
    count and when its window ends (a timestamp; the window starts at the counter's first attempt)."""
    window = settings.ONEFOLD_SIGNIN_WINDOW_SECONDS
    window_ends = timezone.now().timestamp() + window
    cache.add(f"{counter.key}:window-ends", window_ends, window)
    cache.add(counter.key, 0, window)
    try:
        count = cache.incr(counter.key)
    except ValueError:  # the window ended between add and incr: this attempt starts the next
        cache.set(counter.key, count := 1, window)
    return count, cache.get(f"{counter.key}:window-ends", window_ends)


#: How long an attempt past a limit waits for attempts still being checked to end: a right password gives its
#: attempt back, so a burst of right passwords (a script signing in from several threads) settles under the limit,
#: while failures stay counted and a burst of guesses is still refused.
SIGNIN_SETTLE_SECONDS = 5.0


def _signin_settled(counter: _SignInCounter, count: int) -> int:
    """The counter once the attempts in flight with this one have ended, or after SIGNIN_SETTLE_SECONDS."""
    deadline = time.monotonic() + SIGNIN_SETTLE_SECONDS
    while count > counter.limit and time.monotonic() < deadline:
        time.sleep(0.05)
        count = cache.get(counter.key, 0)
    return count


def _signin_refuse(*, name: str, window_ends: float, username: str, request) -> NoReturn:
    audit_record(
        action="auth.sign_in_locked",
        outcome=AuditOutcome.REFUSED,
        request=request,
        details={"username": username[:150], "limit": name},
    )
    raise SignInLocked(retry_after=int(window_ends - timezone.now().timestamp()) + 1)


def signin_check_allowed(*, username: str, request) -> None:
    """Before the password is checked: count the attempt against the account from this address and from
    anywhere, and raise SignInLocked past either's limit. Counted before the check, so that concurrent guesses
    cannot all pass a check made before any of them failed; a right password gives its attempt back
    (signin_success_record)."""
    counters = _signin_counters(username=username, address=client_address_of(request))
    for name in ("account from address", "account"):
        if name in counters:
            count, window_ends = _signin_count(counters[name])
            if _signin_settled(counters[name], count) > counters[name].limit:
                _signin_refuse(
                    name=name, window_ends=window_ends, username=username, request=request
                )


def signin_check_allowed_after_failure(*, username: str, request) -> None:
    """After a wrong password or an unknown name (already counted): raise SignInLocked once the address has
    failed more often than its limit. A right password never comes here: it still signs in."""
    address = _signin_counters(username=username, address=client_address_of(request)).get("address")
    if address is None:
        return
    stored = cache.get_many([address.key, f"{address.key}:window-ends"])
    window_ends = stored.get(f"{address.key}:window-ends", 0)
    if stored.get(address.key, 0) > address.limit and window_ends > timezone.now().timestamp():
        _signin_refuse(name="address", window_ends=window_ends, username=username, request=request)


def signin_failure_record(*, username: str, request) -> None:
    """Count a failed sign-in against the address (the account's counters counted it as an attempt)."""
    address = _signin_counters(username=username, address=client_address_of(request)).get("address")
    if address is not None:
        _signin_count(address)
    audit_record(
        action="auth.sign_in",
        outcome=AuditOutcome.REFUSED,
        request=request,
        details={"username": username[:150]},
    )


def signin_success_record(*, user: User, request, via: str) -> None:
    """A right password gives its attempt back to the account and clears the account's failures from this
    address (not the address's: one address may try many accounts)."""
    counters = _signin_counters(username=user.get_username(), address=client_address_of(request))
    if "account from address" in counters:
        key = counters["account from address"].key
        cache.delete_many([key, f"{key}:window-ends"])
    with contextlib.suppress(ValueError):  # its window has ended
        cache.decr(counters["account"].key)
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
        signin_check_allowed_after_failure(username=username, request=request)
        raise InvalidInput("Unable to log in with provided credentials.")
    signin_success_record(user=user, request=request, via="api")
    return api_token_create(
        user=user,
        name=token_name or f"signed in {timezone.now():%Y-%m-%d %H:%M} UTC",
        request=request,
    )
