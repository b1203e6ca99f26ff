from market.accounts.models import User


def user_profile(*, user: User) -> dict:
    organisation = user.organisation
    return {
        "username": user.username,
        "is_operator": user.is_operator,
        "organisation": None if organisation is None else {
            "id": organisation.id, "name": organisation.name,
            "is_silo": organisation.is_silo, "is_buyer": organisation.is_buyer},
    }
