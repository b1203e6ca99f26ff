"""The webhook pages in Chromium: a silo registers an endpoint (its secret shown once), sends a test delivery,
redelivers it and disables the endpoint; every state passes axe and fits a 390 px phone. Sending the form
again registers nothing twice (frontend/sent_once.py)."""

import pytest
from django.test import Client

from market.webhooks.models import WebhookDelivery, WebhookEndpoint
from tests.frontend.journey_helpers import page_problems, sign_in

WIDTHS = (1280, 390)


def problems_at_every_width(page, state: str) -> list[str]:
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        problems += page_problems(page, f"{state} @{width}px")
    page.set_viewport_size({"width": 1280, "height": 900})
    return problems


@pytest.mark.browser
def test_a_silo_registers_pings_redelivers_and_disables_an_endpoint(
    live_server,  # noqa: F811
    transactional_db,
    page,
    silo_user,
    receiver,
    webhooks_reach_localhost,
):
    sign_in(page, live_server.url, silo_user.username, "silo-password")
    page.goto(f"{live_server.url}/security/webhooks/")
    problems = problems_at_every_width(page, "empty list")
    page.get_by_label("HTTPS URL").fill(receiver.url)
    page.get_by_role("button", name="Register endpoint").click()

    secret = page.locator("#new-secret-value").inner_text()
    endpoint = WebhookEndpoint.objects.get()
    assert secret == endpoint.secret and secret.startswith("whsec_")
    problems += problems_at_every_width(page, "secret shown")
    page.goto(f"{live_server.url}/security/webhooks/")
    assert secret not in page.content()

    page.get_by_role("link", name=receiver.url).click()
    page.get_by_role("button", name="Send a test delivery").click()
    page.wait_for_selector("#deliveries-table tbody tr")
    page.get_by_role("button", name="Redeliver").first.click()
    page.wait_for_function("document.querySelectorAll('#deliveries-table tbody tr').length === 2")
    assert sorted(WebhookDelivery.objects.values_list("event_type", flat=True)) == [
        "webhook.ping",
        "webhook.ping",
    ]
    assert secret not in page.content()
    page.get_by_role("button", name="Disable").click()
    page.wait_for_selector("#disabled-notice")
    problems += problems_at_every_width(page, "endpoint disabled")
    endpoint.refresh_from_db()
    assert endpoint.is_active is False
    assert problems == []


def test_sending_the_registration_form_twice_registers_one_endpoint(silo_user, settings):
    settings.ONEFOLD_WEBHOOK_ALLOW_PRIVATE = settings.ONEFOLD_WEBHOOK_ALLOW_HTTP = True
    browser = Client()
    browser.force_login(silo_user)
    form = {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"], "idempotency_key": "k-1"}
    first = browser.post("/security/webhooks/new/", form)
    second = browser.post("/security/webhooks/new/", form)
    # The first answer showed the secret; the second cannot show it again, and says the form was sent.
    assert (first.status_code, second.status_code) == (200, 409)
    assert WebhookEndpoint.objects.count() == 1


def test_a_private_address_on_the_page_is_refused_with_a_sentence(silo_user):
    browser = Client(raise_request_exception=False)
    browser.force_login(silo_user)
    response = browser.post(
        "/security/webhooks/new/", {"url": "https://10.0.0.1/hook", "events": ["job.succeeded"]}
    )
    assert response.status_code == 400
    assert "10.0.0.1 is a private address" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_a_nul_character_in_the_page_form_is_refused_with_a_sentence(silo_user, settings):
    settings.ONEFOLD_WEBHOOK_ALLOW_PRIVATE = settings.ONEFOLD_WEBHOOK_ALLOW_HTTP = True
    browser = Client(raise_request_exception=False)
    browser.force_login(silo_user)
    response = browser.post(
        "/security/webhooks/new/",
        {"url": "http://127.0.0.1:9/hook", "description": "a\x00b", "events": ["job.succeeded"]},
    )
    assert response.status_code == 400
    assert not WebhookEndpoint.objects.exists()


def test_registering_beyond_the_cap_on_the_page_shows_the_apis_sentence(silo_user, settings):
    settings.ONEFOLD_WEBHOOK_ALLOW_PRIVATE = settings.ONEFOLD_WEBHOOK_ALLOW_HTTP = True
    settings.ONEFOLD_WEBHOOK_ENDPOINTS_PER_ORGANISATION = 1
    browser = Client(raise_request_exception=False)
    browser.force_login(silo_user)
    form = {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"]}
    assert browser.post("/security/webhooks/new/", form).status_code == 200

    response = browser.post("/security/webhooks/new/", form)

    assert response.status_code == 409
    assert (
        "Your organisation already has 1 active webhook endpoint, the most it may have."
        in response.content.decode()
    )
    assert WebhookEndpoint.objects.count() == 1
