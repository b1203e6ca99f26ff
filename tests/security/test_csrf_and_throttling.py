import pytest
from django.test import Client
from rest_framework.test import APIClient

from market.accounts.models import ApiToken
from market.federations.models import Membership


def test_the_api_refuses_a_session_authenticated_write_without_the_csrf_token(silo_user):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(silo_user)
    response = browser.post("/api/auth/tokens/", {"name": "sneaky"}, format="json")
    assert (response.status_code, response.json()["detail"]) == (
        403,
        "CSRF Failed: CSRF cookie not set.",
    )
    assert not ApiToken.objects.filter(name="sneaky").exists()
    assert browser.get("/api/auth/tokens/").status_code == 200  # reads need no token


def test_the_api_accepts_a_session_write_with_the_csrf_token(silo_user):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(silo_user)
    browser.get("/security/tokens/")  # a page with a form sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    response = browser.post(
        "/api/auth/tokens/", {"name": "from the page"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 201


def test_a_token_authenticated_write_needs_no_csrf_token(silo_api):
    silo_api.handler.enforce_csrf_checks = True
    assert silo_api.post("/api/auth/tokens/", {"name": "script"}, format="json").status_code == 201


def test_web_forms_refuse_a_post_without_the_csrf_token(federation, other_silo_user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(other_silo_user)
    assert browser.post(f"/federations/{federation.slug}/join/").status_code == 403
    assert browser.post("/security/tokens/new/", {"name": "x"}).status_code == 403
    assert browser.post("/sign-out/").status_code == 403
    assert not Membership.objects.filter(organisation=other_silo_user.organisation).exists()
    assert not ApiToken.objects.filter(user=other_silo_user).exists()


def test_the_api_throttles_per_token_with_retry_after(silo_user, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    from market.accounts.services import api_token_create

    # The rates as ONEFOLD_API_RATE_PER_TOKEN / _PER_USER / _ANONYMOUS would set them at start-up.
    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {"token": "3/minute", "user": "100/minute", "anonymous": "100/minute"},
    )
    first, second = (api_token_create(user=silo_user, name=name)[1] for name in ("one", "two"))
    client_one, client_two = APIClient(), APIClient()
    client_one.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    client_two.credentials(HTTP_AUTHORIZATION=f"Token {second}")
    assert [client_one.get("/api/me/").status_code for _ in range(3)] == [200, 200, 200]
    throttled = client_one.get("/api/me/")
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 60
    assert client_two.get("/api/me/").status_code == 200  # another token has its own allowance


def test_a_user_with_many_tokens_and_a_browser_session_is_limited_as_one(
    silo_user, other_silo_user, monkeypatch
):
    from rest_framework.throttling import SimpleRateThrottle

    from market.accounts.services import api_token_create

    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {"token": "3/minute", "user": "5/minute", "anonymous": "100/minute"},
    )
    clients = []
    for number in range(6):
        client = APIClient()
        key = api_token_create(user=silo_user, name=f"minted {number}")[1]
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        clients.append(client)
    assert [client.get("/api/me/").status_code for client in clients] == [200] * 5 + [429]
    browser = APIClient()
    browser.force_login(silo_user)
    throttled = browser.get("/api/me/")
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 12  # 5 a minute: the next in 12 s
    other = APIClient()
    other.force_login(other_silo_user)
    assert other.get("/api/me/").status_code == 200  # another user has an allowance of its own


def test_a_forged_forwarded_for_header_does_not_buy_a_fresh_anonymous_allowance(db, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {"token": "100/minute", "user": "100/minute", "anonymous": "2/minute"},
    )
    client = APIClient()
    codes = [
        client.post(
            "/api/auth/token/",
            {"username": "x", "password": "y"},
            HTTP_X_FORWARDED_FOR=f"203.0.113.{n}",
        ).status_code
        for n in range(3)
    ]
    assert codes == [400, 400, 429]


@pytest.mark.parametrize(
    "path",
    [
        "/api/listings/?search=a%00b",
        "/api/submissions/?federation=a%00",
        "/api/jobs/?federation=%00",
        "/federations/?x%00=1",
    ],
)
def test_a_nul_character_in_the_address_is_a_400_not_a_server_error(silo_api, path):
    response = silo_api.get(path)
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": "The address contains a NUL character (%00), which no parameter accepts; remove it."
        },
    )


def test_a_nul_character_in_a_json_body_is_a_400_not_a_server_error(operator_api):
    from market.federations.models import Federation

    response = operator_api.post(
        "/api/federations/",
        {
            "name": "Nul",
            "class_labels": ["a", "b"],
            "allowed_privacy_levels": ["L0"],
            "default_privacy_level": "L0",
            "default_parameters": {"note": "a\x00b"},
        },
        format="json",
    )
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": "'default_parameters.note' holds a NUL character (\\u0000), which no field accepts; remove it."
        },
    )
    assert not Federation.objects.filter(name="Nul").exists()


def test_the_throttle_allows_the_rate_at_once_then_one_request_per_interval(silo_user, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    from market.accounts.authentication import TokenRateThrottle
    from market.accounts.services import api_token_create

    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {"token": "3/minute", "user": "100/minute"}
    )
    token = api_token_create(user=silo_user, name="clock")[0]
    request = type("Request", (), {"auth": token, "user": silo_user})()

    def allowed_at(seconds: float) -> bool:
        throttle = TokenRateThrottle()
        throttle.timer = lambda: seconds
        return throttle.allow_request(request, view=None)

    def retry_after_at(seconds: float) -> float:
        throttle = TokenRateThrottle()
        throttle.timer = lambda: seconds
        assert not throttle.allow_request(request, view=None)
        return throttle.wait()

    assert [allowed_at(1000.0) for _ in range(3)] == [True, True, True]
    assert retry_after_at(1000.0) == 20.0  # 3 a minute: the next in 20 s
    assert retry_after_at(1019.0) == 1.0
    assert allowed_at(1020.0)
    assert not allowed_at(1020.0)
    assert [allowed_at(1080.0) for _ in range(3)] == [
        True,
        True,
        True,
    ]  # a quiet minute: the whole rate again
