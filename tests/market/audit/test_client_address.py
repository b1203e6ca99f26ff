"""Every audit event recorded while answering a request carries the client's address, also those recorded by
services that are not handed the request; behind trusted proxies the address is the one they forwarded."""

import pytest

from market.audit.models import AuditEvent
from tests.market.submissions.helpers import created_through_service, submit
from workers.submission_validation import submission_validate


def addresses(action: str) -> list:
    return list(AuditEvent.objects.filter(action=action).values_list("outcome", "client_address"))


def test_an_upload_accepted_and_one_refused_through_the_api_carry_the_clients_address(
    silo_api, other_silo_api, federation_with_data, model_files
):
    silo_api.defaults["REMOTE_ADDR"] = "192.0.2.10"
    other_silo_api.defaults["REMOTE_ADDR"] = "2001:db8::7"
    assert submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).status_code == 202
    assert submit(other_silo_api, {"forest.onnx": model_files["forest.onnx"]}).status_code == 403
    assert addresses("submission.uploaded") == [
        ("success", "192.0.2.10"),
        ("refused", "2001:db8::7"),
    ]


def test_events_recorded_outside_a_request_have_no_address(
    federation_with_data, silo_user, model_files
):
    submission = created_through_service(
        federation_with_data, silo_user, {"forest.onnx": model_files["forest.onnx"]}
    )
    submission_validate(submission_id=submission.id)
    assert addresses("submission.validated") == [("success", None)]


@pytest.mark.parametrize(
    "proxies, forwarded_for, expected",
    [
        (
            0,
            "203.0.113.5",
            "10.0.0.1",
        ),  # no trusted proxy: a client-sent X-Forwarded-For is ignored
        (
            1,
            "198.51.100.66, 203.0.113.5",
            "203.0.113.5",
        ),  # the client's own entry (left) is not believed
        (2, "198.51.100.66, 203.0.113.5, 10.0.0.2", "203.0.113.5"),
        (2, "203.0.113.5", "203.0.113.5"),  # fewer hops than proxies: the leftmost
        (1, "not-an-address", "10.0.0.1"),
        (1, "", "10.0.0.1"),
    ],
)
def test_the_address_behind_trusted_proxies(
    client, silo_user, settings, proxies, forwarded_for, expected
):
    settings.ONEFOLD_TRUSTED_PROXIES = proxies
    client.post(
        "/api/auth/token/",
        {"username": "sam-silo", "password": "wrong"},
        REMOTE_ADDR="10.0.0.1",
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )
    assert addresses("auth.sign_in") == [("refused", expected)]


def test_sign_in_limits_count_the_forwarded_address_behind_a_proxy(
    client, silo_user, other_silo_user, settings
):
    settings.ONEFOLD_TRUSTED_PROXIES = 1
    settings.ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = 2

    def sign_in(username, password, client_address):
        return client.post(
            "/api/auth/token/",
            {"username": username, "password": password},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=client_address,
        ).status_code

    assert [sign_in(f"guess-{n}", "wrong", "203.0.113.5") for n in range(3)] == [400, 400, 429]
    assert (
        sign_in("bea-bank", "bank-password", "203.0.113.6") == 200
    )  # another client behind the same proxy
