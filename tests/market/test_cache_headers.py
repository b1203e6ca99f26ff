"""Answers made for one viewer tell shared caches not to store them, and vary on the headers that name the viewer;
static files stay cacheable (issue 32, item 15)."""

import pytest
from django.test import Client

from tests.conftest import api_client_for


def cache_headers(response) -> tuple[set[str], set[str]]:
    """The Cache-Control directives and the Vary headers of an answer, lower-cased."""
    return (
        {part.strip().lower() for part in response.get("Cache-Control", "").split(",")},
        {part.strip().lower() for part in response.get("Vary", "").split(",")},
    )


@pytest.mark.parametrize(
    "path", ["/api/listings/", "/api/federations/", "/api/jobs/", "/api/no-such-thing/"]
)
def test_every_api_answer_to_a_token_is_private_and_never_stored(silo_user, path):
    response = api_client_for(silo_user).get(path)
    directives, vary = cache_headers(response)
    assert {"private", "no-store"} <= directives and "public" not in directives
    assert {"cookie", "authorization"} <= vary


@pytest.mark.parametrize("path", ["/market/", "/federations/", "/"])
def test_every_page_is_private_and_never_stored_signed_in_or_not(client, silo_user, path):
    anonymous = client.get(path)
    client.force_login(silo_user)
    signed_in = client.get(path)
    for response in (anonymous, signed_in):
        directives, vary = cache_headers(response)
        assert {"private", "no-store"} <= directives
        assert {"cookie", "authorization"} <= vary


def test_the_anonymous_sign_in_page_and_token_refusal_are_private_too(db):
    for response in (
        Client().get("/sign-in/"),
        Client().post("/api/auth/token/", {}, content_type="application/json"),
    ):
        directives, vary = cache_headers(response)
        assert {"private", "no-store"} <= directives and {"cookie", "authorization"} <= vary


def test_a_download_keeps_its_no_store_and_becomes_private():
    from django.http import HttpResponse

    from market.cache_headers import PrivateAnswersMiddleware

    def view(request):
        response = HttpResponse(b"model")
        response["Cache-Control"] = "no-store"
        response["Vary"] = "Accept"
        return response

    response = PrivateAnswersMiddleware(view)(None)
    assert cache_headers(response) == (
        {"no-store", "private"},
        {"accept", "cookie", "authorization"},
    )


def test_static_files_stay_cacheable(settings):
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    response = Client().get("/static/frontend/onefold.css")
    assert response.status_code == 200
    directives, _ = cache_headers(response)
    assert "no-store" not in directives and "private" not in directives
    assert any(directive.startswith("max-age=") for directive in directives)
