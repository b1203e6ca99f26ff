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


@pytest.mark.parametrize("path", ["/market/", "/federations/", "/", "/no-such-page/"])
def test_every_page_is_private_signed_in_or_not_and_stays_in_the_browser_for_back(
    client, silo_user, path
):
    """Private: no shared cache stores it. Not no-store: Back shows the form that was sent, with its key."""
    anonymous = client.get(path)
    client.force_login(silo_user)
    signed_in = client.get(path)
    for response in (anonymous, signed_in):
        directives, vary = cache_headers(response)
        assert "private" in directives and not {"public", "no-store"} & directives
        assert {"cookie", "authorization"} <= vary


def test_the_anonymous_sign_in_page_and_token_refusal_are_private_too(db):
    page = Client().get("/sign-in/")
    answer = Client().post("/api/auth/token/", {}, content_type="application/json")
    # the sign-in page keeps the never_cache directives its view sets (no-store among them)
    assert "private" in cache_headers(page)[0]
    assert cache_headers(answer)[0] == {"private", "no-store"}
    assert {"cookie", "authorization"} <= cache_headers(page)[1] & cache_headers(answer)[1]


def test_a_download_keeps_its_no_store_and_becomes_private(rf):
    from django.http import HttpResponse

    from market.cache_headers import PrivateAnswersMiddleware

    def view(request):
        response = HttpResponse(b"model")
        response["Cache-Control"] = "no-store"
        response["Vary"] = "Accept"
        return response

    for path in ("/api/downloads/x/", "/market/listings/1/package/"):
        response = PrivateAnswersMiddleware(view)(rf.get(path))
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
