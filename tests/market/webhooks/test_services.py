"""Writes on webhook endpoints: an organisation's active endpoints are capped (issue 38 item 8)."""

import pytest

from market.webhooks.models import WebhookEndpoint
from tests.conftest import api_client_for
from tests.fixtures.webhooks import PUBLIC, resolving_to

pytestmark = pytest.mark.django_db

CAP_SENTENCE = (
    "Your organisation already has 2 active webhook endpoints, the most it may have. Disable one you no "
    "longer need (on its page, or POST /api/webhook-endpoints/<id>/disable/) to free a slot."
)


@pytest.fixture
def two_endpoints_at_most(settings, monkeypatch):
    settings.ONEFOLD_WEBHOOK_ENDPOINTS_PER_ORGANISATION = 2
    resolving_to(monkeypatch, PUBLIC)


def registered(client, number: int):
    return client.post(
        "/api/webhook-endpoints/",
        {"url": f"https://hooks.example.org/{number}", "events": ["job.succeeded"]},
        format="json",
    )


def test_registering_beyond_the_cap_is_a_409_that_says_how_to_free_a_slot_and_creates_nothing(
    silo_user, two_endpoints_at_most
):
    client = api_client_for(silo_user)
    assert [registered(client, number).status_code for number in (1, 2)] == [201, 201]

    response = registered(client, 3)

    assert response.status_code == 409
    assert response.json()["detail"] == CAP_SENTENCE
    assert WebhookEndpoint.objects.count() == 2


def test_disabling_an_endpoint_frees_its_slot_and_enabling_it_beyond_the_cap_is_refused(
    silo_user, two_endpoints_at_most
):
    client = api_client_for(silo_user)
    first, _second = (registered(client, number).json()["id"] for number in (1, 2))
    assert client.post(f"/api/webhook-endpoints/{first}/disable/").status_code == 200
    assert registered(client, 3).status_code == 201

    response = client.post(f"/api/webhook-endpoints/{first}/enable/")

    assert response.status_code == 409
    assert response.json()["detail"] == CAP_SENTENCE
    assert WebhookEndpoint.objects.get(id=first).is_active is False


def test_the_cap_counts_only_the_organisations_own_endpoints(
    silo_user, other_silo_user, two_endpoints_at_most
):
    client = api_client_for(silo_user)
    assert [registered(client, number).status_code for number in (1, 2)] == [201, 201]

    assert registered(api_client_for(other_silo_user), 1).status_code == 201
