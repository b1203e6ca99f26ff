"""The app's own error pages (frontend/error_pages.py): an unknown address, a failed CSRF check and Django's debug
404 become pages of the app with the role's way back; the API keeps its JSON."""

import pytest
from django.test import Client

from frontend.error_pages import PAGE_MARK


@pytest.fixture
def silo_client(silo_user):
    client = Client()
    client.force_login(silo_user)
    return client


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_address_is_the_apps_page_with_a_way_back(silo_client, db, settings, debug):
    settings.DEBUG = debug  # the demo runs with DEBUG on, where Django would answer its debug page

    signed_in = silo_client.get("/no/such/page/")
    anonymous = Client().get("/no/such/page/")

    for response in (signed_in, anonymous):
        assert response.status_code == 404
        assert PAGE_MARK in response.content
        assert "There is no page at this address." in response.text
        assert "Page not found at" not in response.text  # Django's debug page
    assert '<a href="/">Back to your start page</a>' in signed_in.text
    assert ">Sign in</a>" in anonymous.text


def test_the_api_keeps_its_json_404(silo_client, db, settings):
    settings.DEBUG = True

    response = silo_client.get("/api/no-such-thing/")

    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_a_form_without_its_csrf_token_gets_a_page_that_says_to_reload(silo_user, db):
    client = Client(enforce_csrf_checks=True)
    client.force_login(silo_user)

    response = client.post("/security/tokens/new/", {"name": "stale form"})

    assert response.status_code == 403
    assert PAGE_MARK in response.content
    assert "This form has expired or was sent from another site." in response.text
    assert "Back to your start page" in response.text


def test_the_apps_own_error_pages_are_left_as_they_are(silo_client, db):
    response = silo_client.get("/federations/no-such-thing/")

    assert response.status_code == 404
    assert "There is no federation &#x27;no-such-thing&#x27;." in response.text
