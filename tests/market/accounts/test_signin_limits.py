from django.test import Client

from market.accounts.models import ApiToken
from market.audit.models import AuditEvent


def wrong_password(client, username="sam-silo", address="10.0.0.1"):
    return client.post(
        "/api/auth/token/", {"username": username, "password": "wrong"}, REMOTE_ADDR=address
    )


def sign_in(client, username="sam-silo", password="silo-password", address="10.0.0.1"):
    return client.post(
        "/api/auth/token/", {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_an_account_that_used_its_failures_from_an_address_is_refused_there_even_with_its_password(
    silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 3
    assert [wrong_password(client).status_code for _ in range(3)] == [400, 400, 400]
    locked = sign_in(client)  # the right password cannot be told apart: no fourth guess is checked
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= settings.ONEFOLD_SIGNIN_WINDOW_SECONDS + 1
    assert locked.json()["detail"].startswith("Too many failed sign-ins; try again in 15 minutes.")
    refusals = AuditEvent.objects.filter(outcome="refused").values_list("action", "details")
    assert list(refusals)[3:] == [
        ("auth.sign_in_locked", {"username": "sam-silo", "limit": "account from address"})
    ]
    assert not ApiToken.objects.exists()
    assert sign_in(client, address="10.0.0.2").status_code == 200  # its owner, elsewhere


def test_an_account_is_limited_across_addresses_too(silo_user, client, settings):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT = 4
    codes = [wrong_password(client, address=f"10.0.1.{n}").status_code for n in range(4)]
    assert codes == [400, 400, 400, 400]
    assert (
        sign_in(client, address="10.0.1.99").status_code == 429
    )  # a fifth address, the right password
    assert not ApiToken.objects.exists()


def test_guessing_names_from_an_address_cannot_lock_a_known_user_out_of_it(
    operator, silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = 20
    codes = [wrong_password(client, username=f"guess-{n}").status_code for n in range(21)]
    assert codes == [400] * 20 + [429]
    assert wrong_password(client, username="sam-silo").status_code == 429  # a known name, wrong
    assert sign_in(client, username="nobody-here").status_code == 429  # no oracle for names either
    signed_in = sign_in(client, username="olivia-operator", password="operator-password")
    assert signed_in.status_code == 200
    assert ApiToken.objects.get().user == operator
    browser = Client(REMOTE_ADDR="10.0.0.1")
    response = browser.post(
        "/sign-in/", {"username": "sam-silo", "password": "silo-password"}, REMOTE_ADDR="10.0.0.1"
    )
    assert (response.status_code, browser.session["_auth_user_id"]) == (302, str(silo_user.pk))


def test_failures_are_also_limited_per_address_across_accounts(
    silo_user, other_silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = 4
    for attempt in range(4):
        wrong_password(client, username=f"guess-{attempt}")
    assert wrong_password(client, username="sam-silo").status_code == 429
    assert (
        AuditEvent.objects.filter(action="auth.sign_in_locked").values_list("details", flat=True)
    ).get() == {"username": "sam-silo", "limit": "address"}
    assert (
        sign_in(client, username="bea-bank", password="bank-password", address="10.0.0.9")
    ).status_code == 200


def test_a_successful_sign_in_clears_the_accounts_failures_from_its_address(
    silo_user, client, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 3
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT = 5
    wrong_password(client), wrong_password(client)
    assert sign_in(client).status_code == 200
    wrong_password(client), wrong_password(client)
    assert wrong_password(client).status_code == 400  # only 2 failures since the success
    assert wrong_password(client).status_code == 429  # the account's 6th failure from anywhere


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


def test_the_web_sign_in_form_refuses_guessed_names_from_a_locked_address_but_not_a_right_password(
    silo_user, settings
):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = 3
    browser = Client()
    for attempt in range(3):
        browser.post("/sign-in/", {"username": f"guess-{attempt}", "password": "nope"})
    guessed = browser.post("/sign-in/", {"username": "guess-9", "password": "nope"})
    assert b"Too many failed sign-ins; try again in 15 minutes." in guessed.content
    response = browser.post("/sign-in/", {"username": "sam-silo", "password": "silo-password"})
    assert (response.status_code, browser.session["_auth_user_id"]) == (302, str(silo_user.pk))


def test_the_admin_sign_in_page_is_limited_too(operator, settings):
    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 1
    browser = Client()
    browser.post("/admin/login/", {"username": "olivia-operator", "password": "nope"})
    locked = browser.post(
        "/admin/login/", {"username": "olivia-operator", "password": "operator-password"}
    )
    assert b"Too many failed sign-ins" in locked.content
    assert "_auth_user_id" not in browser.session


def test_concurrent_guesses_at_one_account_are_counted_before_any_password_is_checked(
    transactional_db, silo_user, settings
):
    import threading

    from django.db import connections

    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 5
    guessers = 16
    start = threading.Barrier(guessers)
    codes = []

    def guess():
        start.wait()
        try:
            codes.append(wrong_password(Client()).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=guess) for _ in range(guessers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [400] * 5 + [429] * 11
    assert AuditEvent.objects.filter(action="auth.sign_in", outcome="refused").count() == 5


def test_a_burst_of_right_passwords_from_one_address_all_sign_in(
    transactional_db, silo_user, settings
):
    """A script signing in from more threads than the limit: the attempts still being checked are counted, but a
    right password gives its attempt back, so the burst settles under the limit instead of locking the user out
    (the SQLite concurrency test hit this with 8 writers against a limit of 5)."""
    import threading

    from django.db import connections

    settings.ONEFOLD_SIGNIN_MAX_FAILURES = 5
    signers = 12
    start = threading.Barrier(signers)
    codes = []

    def sign_in_at_once():
        start.wait()
        try:
            codes.append(sign_in(Client()).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sign_in_at_once) for _ in range(signers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [200] * signers
