from django.test import Client

from market.audit.models import AuditEvent


def wrong_password(client, username="sam-silo", address="10.0.0.1"):
    return client.post(
        "/api/auth/token/", {"username": username, "password": "wrong"}, REMOTE_ADDR=address
    )


def test_the_token_endpoint_answers_429_with_retry_after_once_an_account_used_its_failures(
    silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 3
    assert [wrong_password(client).status_code for _ in range(3)] == [400, 400, 400]
    locked = client.post(
        "/api/auth/token/",
        {"username": "sam-silo", "password": "silo-password"},
        REMOTE_ADDR="10.0.0.2",
    )  # even the right password, from another address
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= settings.ONEFOLD_SIGNIN_WINDOW_SECONDS + 1
    assert locked.json()["detail"].startswith("Too many failed sign-ins; try again in 15 minutes.")
    refusals = AuditEvent.objects.filter(outcome="refused").values_list("action", flat=True)
    assert list(refusals) == ["auth.sign_in"] * 3 + ["auth.sign_in_locked"]


def test_failures_are_also_limited_per_address_across_accounts(
    silo_user, other_silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = 4
    for attempt in range(4):
        wrong_password(client, username=f"guess-{attempt}")
    assert wrong_password(client, username="sam-silo").status_code == 429
    assert (
        client.post(
            "/api/auth/token/",
            {"username": "bea-bank", "password": "bank-password"},
            REMOTE_ADDR="10.0.0.9",
        ).status_code
        == 200
    )


def test_a_successful_sign_in_clears_the_accounts_failures(silo_user, client, settings):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 3
    wrong_password(client), wrong_password(client)
    assert (
        client.post(
            "/api/auth/token/", {"username": "sam-silo", "password": "silo-password"}
        ).status_code
        == 200
    )
    wrong_password(client, address="10.0.0.5"), wrong_password(client, address="10.0.0.6")
    assert (
        wrong_password(client, address="10.0.0.7").status_code == 400
    )  # only 2 failures since the success


def test_the_web_sign_in_form_is_limited_and_audited(silo_user, settings):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 2
    browser = Client()
    for _ in range(2):
        assert (
            browser.post("/sign-in/", {"username": "sam-silo", "password": "nope"}).status_code
            == 200
        )
    locked = browser.post("/sign-in/", {"username": "sam-silo", "password": "silo-password"})
    assert (
        locked.status_code == 200
        and b"Too many failed sign-ins; try again in 15 minutes." in locked.content
    )
    assert "_auth_user_id" not in browser.session
    assert list(AuditEvent.objects.values_list("action", "outcome")) == [
        ("auth.sign_in", "refused"),
        ("auth.sign_in", "refused"),
        ("auth.sign_in_locked", "refused"),
    ]


def test_a_web_sign_in_is_audited_with_the_actor_and_address(silo_user):
    browser = Client()
    response = browser.post("/sign-in/", {"username": "sam-silo", "password": "silo-password"})
    assert response.status_code == 302
    event = AuditEvent.objects.get()
    assert (
        event.action,
        event.outcome,
        event.actor,
        event.organisation,
        event.client_address,
        event.details,
    ) == ("auth.sign_in", "success", silo_user, silo_user.organisation, "127.0.0.1", {"via": "web"})


def test_the_admin_sign_in_page_is_limited_too(operator, settings):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 1
    browser = Client()
    browser.post("/admin/login/", {"username": "olivia-operator", "password": "nope"})
    locked = browser.post(
        "/admin/login/", {"username": "olivia-operator", "password": "operator-password"}
    )
    assert b"Too many failed sign-ins" in locked.content
    assert "_auth_user_id" not in browser.session
