import pytest


@pytest.fixture
def five_silos(federation_with_data, silo_user):
    """Five member silos of the Adult federation (Northwind Hospital and four more)."""
    from market.accounts.services import organisation_create, user_create
    from market.federations.membership import federation_join

    users = [silo_user]
    for index in range(1, 5):
        user = user_create(
            username=f"silo-{index}",
            password=f"silo-{index}-password",
            organisation=organisation_create(name=f"Silo {index}"),
        )
        federation_join(federation=federation_with_data, user=user)
        users.append(user)
    return users
