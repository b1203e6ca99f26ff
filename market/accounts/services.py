from django.db import transaction
from rest_framework.authtoken.models import Token

from market.accounts.models import Organisation, User
from market.errors import Conflict


@transaction.atomic
def organisation_create(*, name: str, is_silo: bool = True, is_buyer: bool = False) -> Organisation:
    if Organisation.objects.filter(name__iexact=name).exists():
        raise Conflict(f"An organisation called {name!r} already exists; choose another name.")
    return Organisation.objects.create(name=name, is_silo=is_silo, is_buyer=is_buyer)


@transaction.atomic
def user_create(*, username: str, password: str, organisation: Organisation | None = None,
                is_operator: bool = False) -> User:
    if User.objects.filter(username=username).exists():
        raise Conflict(f"A user called {username!r} already exists; choose another username.")
    # Operators administer the whole market, in the admin site too.
    return User.objects.create_user(username=username, password=password, organisation=organisation,
                                    is_staff=is_operator, is_superuser=is_operator)


def user_token(*, user: User) -> str:
    """The user's API token, created on first use."""
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
