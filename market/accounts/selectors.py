import functools
import hashlib

from django.db import connection
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from market.accounts.models import ApiToken, Organisation, User


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
    token = _token_with_user(api_token_hash(key))
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


# Every API request looks its token up. The ORM compiles ``select_related("user", "user__organisation").get()``
# anew each time, which was a quarter of a cached catalog request's CPU (benchmarks/catalog.md); this is the same
# statement, written once per process from the models' own fields, and the same model instances via ``from_db``.
_TOKEN_JOIN = (
    (ApiToken, "token"),
    (User, "person"),
    (Organisation, "organisation"),
)


@functools.cache
def _token_statement() -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(
        f"{alias}.{quote(field.column)}"
        for model, alias in _TOKEN_JOIN
        for field in model._meta.concrete_fields
    )
    user_of_token = ApiToken._meta.get_field("user").column
    organisation_of_user = User._meta.get_field("organisation").column
    return (
        f"SELECT {columns} FROM {quote(ApiToken._meta.db_table)} token "
        f"JOIN {quote(User._meta.db_table)} person "
        f"ON person.{quote(User._meta.pk.column)} = token.{quote(user_of_token)} "
        f"LEFT JOIN {quote(Organisation._meta.db_table)} organisation "
        f"ON organisation.{quote(Organisation._meta.pk.column)} = person.{quote(organisation_of_user)} "
        f"WHERE token.{quote(ApiToken._meta.get_field('key_hash').column)} = %s"
    )


def _token_with_user(key_hash: str) -> ApiToken | None:
    with connection.cursor() as cursor:
        cursor.execute(_token_statement(), [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    instances = []
    for model, _ in _TOKEN_JOIN:
        fields = model._meta.concrete_fields
        values, row = row[: len(fields)], row[len(fields) :]
        primary_key = values[fields.index(model._meta.pk)]
        instances.append(
            None
            if primary_key is None  # a user without an organisation
            else model.from_db(connection.alias, [field.attname for field in fields], values)
        )
    token, user, organisation = instances
    user.organisation = organisation
    token.user = user
    return token
