"""Outbound safety: only HTTPS to public addresses, checked at registration and again, after DNS, at delivery;
the delivery connects to the address it checked; no redirect is followed."""

import socket

import pytest
from rest_framework.test import APIClient

from market.webhooks.delivery import webhook_deliver
from market.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from market.webhooks.outbound import address_refusal
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db

PUBLIC = "93.184.215.14"


def resolving_to(monkeypatch, address: str) -> None:
    """DNS, the world outside the machine: every name resolves to ``address``."""

    def getaddrinfo(host, port, *arguments, **keywords):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "not a public"),
        ("fd00:ec2::254", "private"),
    ],
)
def test_addresses_inside_networks_are_refused(address, kind):
    assert kind in address_refusal(address)


def test_a_public_address_is_allowed():
    assert address_refusal(PUBLIC) == ""


def test_registering_a_private_address_is_a_400_that_says_why_and_creates_nothing(silo_user):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://127.0.0.1/hook", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 400
    assert "127.0.0.1 is a loopback address" in response.json()["detail"]
    assert not WebhookEndpoint.objects.exists()


def test_registering_plain_http_is_a_400(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "http://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "A webhook URL must start with https://."
    assert not WebhookEndpoint.objects.exists()


def test_an_unknown_event_type_is_a_400_that_names_the_choices(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.exploded"]},
        format="json",
    )
    assert response.status_code == 400
    assert "events" in response.json()
    assert not WebhookEndpoint.objects.exists()


def test_the_secret_is_shown_at_creation_and_rotation_only(silo_user, monkeypatch):
    resolving_to(monkeypatch, PUBLIC)
    client: APIClient = api_client_for(silo_user)
    created = client.post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    ).json()
    assert created["secret"].startswith("whsec_")
    path = f"/api/webhook-endpoints/{created['id']}/"
    assert "secret" not in client.get(path).json()
    assert all(
        "secret" not in endpoint for endpoint in client.get("/api/webhook-endpoints/").json()
    )
    rotated = client.post(f"{path}rotate-secret/").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.secret, endpoint.previous_secret) == (rotated["secret"], created["secret"])


def test_a_host_whose_dns_turns_private_after_registration_is_refused_at_delivery(
    silo_user, monkeypatch
):
    from market.webhooks.services import webhook_endpoint_ping

    resolving_to(monkeypatch, PUBLIC)
    created = api_client_for(silo_user).post(
        "/api/webhook-endpoints/",
        {"url": "https://hooks.example.org/", "events": ["job.succeeded"]},
        format="json",
    )
    assert created.status_code == 201
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=created.json()["id"])
    resolving_to(monkeypatch, "10.0.0.5")  # DNS rebinding: the name now points inside

    assert webhook_deliver(delivery_id=delivery.id) is False

    attempt = WebhookAttempt.objects.get()
    assert attempt.response_status is None
    assert attempt.error.startswith("Refused before connecting:")
    assert "10.0.0.5 is a private address" in attempt.error
    assert WebhookDelivery.objects.get().status == "pending"


def test_the_delivery_connects_to_the_address_it_checked_and_sends_the_name_as_host(
    silo_user, monkeypatch, receiver, webhooks_reach_localhost
):
    resolving_to(monkeypatch, "127.0.0.1")  # a name only this test's DNS knows
    port = receiver.url.split(":")[2].split("/")[0]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation,
        url=f"http://hooks.invalid:{port}/onefold",
        events=["job.succeeded"],
        secret="whsec_test",
    )
    from market.webhooks.services import webhook_endpoint_ping

    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)

    assert webhook_deliver(delivery_id=delivery.id) is True
    assert receiver.received[0].headers["Host"] == f"hooks.invalid:{port}"


def test_a_redirect_is_not_followed_and_counts_as_a_failure(
    silo_user, receiver, webhooks_reach_localhost
):
    from market.webhooks.services import webhook_endpoint_ping

    receiver.answers = [302]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation,
        url=receiver.url,
        events=["job.succeeded"],
        secret="whsec_test",
    )
    delivery = webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id)

    assert webhook_deliver(delivery_id=delivery.id) is False
    assert len(receiver.received) == 1
    assert WebhookAttempt.objects.get().response_status == 302


def test_an_endpoint_that_keeps_failing_is_disabled_and_its_organisation_emailed(
    silo_user, receiver, webhooks_reach_localhost, mailoutbox, django_capture_on_commit_callbacks
):
    from market.webhooks.delivery import webhook_deliver as deliver
    from market.webhooks.services import webhook_endpoint_ping

    webhooks_reach_localhost.ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES = 2
    silo_user.email = "ops@example.org"
    silo_user.save()
    receiver.answers = [500, 500]
    endpoint = WebhookEndpoint.objects.create(
        organisation=silo_user.organisation, url=receiver.url, events=["job.succeeded"], secret="s"
    )
    with django_capture_on_commit_callbacks(execute=True):
        deliveries = [webhook_endpoint_ping(user=silo_user, endpoint_id=endpoint.id) for _ in "ab"]
    with django_capture_on_commit_callbacks(execute=True):
        for delivery in deliveries:
            deliver(delivery_id=delivery.id)

    endpoint.refresh_from_db()
    assert endpoint.is_active is False
    assert endpoint.disabled_reason.startswith("Disabled by the market after 2 failed attempts")
    assert [mail.to for mail in mailoutbox] == [["ops@example.org"]]
    assert endpoint.url in mailoutbox[0].body


@pytest.mark.parametrize(
    "url", ["https://[::1/hook", "https://hooks.example.org:port/", "https://\x00/", "https:///x"]
)
def test_an_unreadable_url_is_a_400_that_says_so(silo_user, url):
    response = api_client_for(silo_user).post(
        "/api/webhook-endpoints/", {"url": url, "events": ["job.succeeded"]}, format="json"
    )
    assert response.status_code == 400
    assert not WebhookEndpoint.objects.exists()
