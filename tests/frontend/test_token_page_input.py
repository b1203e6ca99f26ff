"""The token page reads its lifetime field without a server error, whatever digits it is sent."""

import pytest
from django.test import Client


@pytest.mark.parametrize("days", ["²", "9" * 5000])
def test_a_token_lifetime_that_is_not_a_whole_number_takes_the_default(silo_user, days):
    client = Client(raise_request_exception=False)
    client.force_login(silo_user)
    response = client.post("/security/tokens/new/", {"name": "laptop", "expires_in_days": days})
    assert response.status_code == 200
    assert silo_user.api_tokens.filter(name="laptop").count() == 1
