import hashlib

from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from market.accounts.models import ApiToken, User


def user_profile(*, user: User) -> dict:
    organisation = user.organisation
    return {
        "username": user.username,
        "is_operator": user.is_operator,
        "organisation": None
        if organisation is None
        else {
            "id": organisation.id,
            "name": organisation.name,
            "is_silo": organisation.is_silo,
            "is_buyer": organisation.is_buyer,
        },
    }


def api_token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def api_token_list(*, user: User) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user))


def api_token_state(token: ApiToken) -> str:
    if token.revoked_at is not None:
        return "revoked"
    return "expired" if token.expires_at <= timezone.now() else "active"


def api_token_for_key(*, key: str) -> ApiToken:
    """The active token with this key, or AuthenticationFailed saying why it does not work."""
    # get(), not first(): the hash is unique, and first()'s ORDER BY costs every API request a longer query
    try:
        token = ApiToken.objects.select_related("user", "user__organisation").get(
            key_hash=api_token_hash(key)
        )
    except ApiToken.DoesNotExist:
        token = None
    if token is None or not token.user.is_active:
        raise AuthenticationFailed("Invalid token.")
    state = api_token_state(token)
    if state == "revoked":
        raise AuthenticationFailed("This token was revoked; create a new one.")
    if state == "expired":
        raise AuthenticationFailed(
            f"This token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one."
        )
    return token
