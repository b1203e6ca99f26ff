import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection
from django.db.models import Model, QuerySet
from django.db.models.expressions import Col
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
# statement, written once per process from the models' own fields, its values converted as the ORM converts them
# (SQLite, for one, returns dates as text and booleans as integers), and the same model instances via ``from_db``.
_TOKEN_JOIN = (
    (ApiToken, "token"),
    (User, "person"),
    (Organisation, "organisation"),
)


@dataclass(frozen=True)
class _SelectedModel:
    model: type[Model]
    values: slice  # its values in a row
    primary_key: int  # the position of its primary key in a row
    attnames: tuple[str, ...]  # what ``from_db`` is given the values as


@dataclass(frozen=True)
class _TokenStatement:
    sql: str
    columns: tuple[Col, ...]  # one per selected value, in order
    converters: tuple[
        tuple[int, tuple[Callable, ...]], ...
    ]  # (position, the ORM's converters for that value)
    models: tuple[_SelectedModel, ...]  # token, user, organisation


@functools.cache
def _token_statement() -> _TokenStatement:
    quote = connection.ops.quote_name
    columns = tuple(
        field.get_col(alias)
        for model, alias in _TOKEN_JOIN
        for field in model._meta.concrete_fields
    )
    converters = tuple(
        (position, found)
        for position, column in enumerate(columns)
        if (
            found := tuple(
                connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            )
        )
    )
    models, start = [], 0
    for model, _ in _TOKEN_JOIN:
        fields = model._meta.concrete_fields
        models.append(
            _SelectedModel(
                model,
                slice(start, start + len(fields)),
                start + fields.index(model._meta.pk),
                tuple(field.attname for field in fields),
            )
        )
        start += len(fields)
    user_of_token = ApiToken._meta.get_field("user").column
    organisation_of_user = User._meta.get_field("organisation").column
    selected = ", ".join(f"{column.alias}.{quote(column.target.column)}" for column in columns)
    sql = (
        f"SELECT {selected} FROM {quote(ApiToken._meta.db_table)} token "
        f"JOIN {quote(User._meta.db_table)} person "
        f"ON person.{quote(User._meta.pk.column)} = token.{quote(user_of_token)} "
        f"LEFT JOIN {quote(Organisation._meta.db_table)} organisation "
        f"ON organisation.{quote(Organisation._meta.pk.column)} = person.{quote(organisation_of_user)} "
        f"WHERE token.{quote(ApiToken._meta.get_field('key_hash').column)} = %s"
    )
    return _TokenStatement(sql, columns, converters, tuple(models))


def _token_with_user(key_hash: str) -> ApiToken | None:
    statement = _token_statement()
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    row = list(row)
    for position, converters in statement.converters:
        for converter in converters:
            row[position] = converter(row[position], statement.columns[position], connection)
    token, user, organisation = (
        None  # a user without an organisation
        if row[selected.primary_key] is None
        else selected.model.from_db(connection.alias, selected.attnames, row[selected.values])
        for selected in statement.models
    )
    user.organisation = organisation
    token.user = user
    return token


def operator_exists() -> bool:
    """Whether the market has an operator yet (the sign-in page points a new market to its first-run command)."""
    return User.objects.filter(is_staff=True).exists()


def organisation_list() -> QuerySet[Organisation]:
    """Every organisation, by name (the operator's forms choose one)."""
    return Organisation.objects.order_by("name")


def organisation_find(*, organisation_id: int | str | None) -> Organisation | None:
    """The organisation with this id, or None when there is none (market.errors, which names the error of an id
    that is not found, imports DRF, whose settings import this app's authentication: no import of it here)."""
    return Organisation.objects.filter(pk=organisation_id).first()
