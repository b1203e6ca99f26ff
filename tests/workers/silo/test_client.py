"""The client's error and retry rules, against a scripted HTTP server standing in for a failing network or market.

(The real market is exercised in test_live_market.py; a live market cannot be made to answer 503 on demand.)
"""

import pytest

from workers.silo.client import ModelUpload, OnefoldClient
from workers.silo.errors import (
    ApiError,
    Conflict,
    InvalidRequest,
    MarketUnreachable,
    NotFound,
    PermissionDenied,
    ServerError,
    error_for_status,
)
from workers.silo.http import retry_after_seconds


def test_5xx_answers_are_retried_until_one_succeeds(scripted):
    market, client = scripted(
        (503, {"detail": "busy"}), (502, {}), (200, [{"slug": "adult-income"}])
    )
    assert [federation.slug for federation in client.federations()] == ["adult-income"]
    assert [request["path"] for request in market.received] == ["/api/federations/"] * 3
    assert market.received[0]["headers"]["Authorization"] == "Token token-123"


def test_a_market_failing_on_every_attempt_raises_server_error_with_its_message(scripted):
    market, client = scripted(*[(500, {"detail": "The database is down."})] * 4)
    with pytest.raises(ServerError) as raised:
        client.federations()
    assert (raised.value.status, raised.value.message) == (500, "The database is down.")
    assert len(market.received) == 4


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, InvalidRequest), (403, PermissionDenied), (404, NotFound), (409, Conflict)],
)
def test_4xx_answers_are_never_retried_and_carry_the_markets_sentence(scripted, status, kind):
    market, client = scripted(
        (status, {"detail": "Your organisation is not a member of 'x'; join it first."})
    )
    with pytest.raises(kind) as raised:
        client.federation("x")
    assert (raised.value.status, raised.value.message) == (
        status,
        "Your organisation is not a member of 'x'; join it first.",
    )
    assert len(market.received) == 1


def test_field_errors_are_joined_into_one_sentence(scripted):
    _, client = scripted(
        (
            400,
            {
                "n_local_examples": ["Ensure this value is greater than or equal to 1."],
                "non_field_errors": ["Attach at least one model file."],
            },
        )
    )
    with pytest.raises(InvalidRequest) as raised:
        client.federation_create(name="x")
    assert raised.value.message == (
        "n_local_examples: Ensure this value is greater than or equal to 1.; "
        "Attach at least one model file."
    )


def test_no_market_listening_raises_market_unreachable_after_every_retry():
    client = OnefoldClient(
        "http://127.0.0.1:9", "token", retries=2, backoff_seconds=0, timeout_seconds=2
    )
    with pytest.raises(MarketUnreachable) as raised:
        client.federations()
    assert raised.value.message == (
        "Could not reach the market at http://127.0.0.1:9/ after 3 attempt(s) "
        "(ConnectionError); check the address and that the market is running."
    )
    assert raised.value.exit_code == 6


def test_a_retried_purchase_sends_the_same_idempotency_key(scripted):
    market, client = scripted((502, {}), (201, {"id": 9}))
    assert client.purchase(4).id == 9
    keys = [request["headers"]["Idempotency-Key"] for request in market.received]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 36


def test_a_retried_upload_sends_the_whole_body_again_and_reports_progress(scripted):
    market, client = scripted((503, {}), (201, {"id": 5, "status": "pending"}))
    seen = []
    answer = client.submission_create(
        federation="adult-income",
        files=[ModelUpload("s.onnx", b"x" * 300_000)],
        metadata={
            "model_family": "random_forest",
            "n_local_examples": 10,
            "label_distribution": [4, 6],
            "declared_epsilon": None,
        },
        progress=lambda sent, total: seen.append((sent, total)),
    )
    assert (answer.id, answer.status, answer.data) == (5, "pending", {"id": 5, "status": "pending"})
    first, second = (request["body"] for request in market.received)
    assert len(first) == len(second) > 300_000
    assert (
        b'name="label_distribution"\r\n\r\n[4, 6]\r\n' in second
        and b"declared_epsilon" not in second
    )
    assert seen[-1][0] == seen[-1][1] == len(second)


def test_statuses_map_to_their_error_classes():
    assert type(error_for_status(413, "too big")).__name__ == "PayloadTooLarge"
    assert type(error_for_status(415, "pickle")).__name__ == "UnsupportedFormat"
    assert type(error_for_status(418, "teapot")).__name__ == "ApiError"
    assert error_for_status(503, "down").exit_code == 6


@pytest.fixture
def waits(monkeypatch):
    """The client's sleeps between attempts, recorded instead of slept."""
    slept = []
    monkeypatch.setattr("workers.silo.http.time.sleep", slept.append)
    return slept


def test_a_post_without_an_idempotency_key_is_not_retried_after_a_5xx(scripted, waits):
    market, client = scripted(
        (502, {"detail": "Bad gateway."}), (200, {"id": 3, "status": "cancelled"})
    )
    with pytest.raises(ServerError) as raised:
        client.job_cancel(3)
    assert (raised.value.status, raised.value.message) == (502, "Bad gateway.")
    assert len(market.received) == 1 and waits == []


def test_a_retried_job_creation_sends_the_same_idempotency_key(scripted, waits):
    market, client = scripted((504, {}), "drop", (201, {"id": 4}))
    assert client.job_create("adult-income", kind="fedkt", privacy_level="L1").id == 4
    keys = [request["headers"]["Idempotency-Key"] for request in market.received]
    assert len(keys) == 3 and len(set(keys)) == 1 and len(keys[0]) == 36
    assert [request["path"] for request in market.received] == [
        "/api/federations/adult-income/jobs/"
    ] * 3


def test_a_post_whose_connection_broke_after_sending_is_not_sent_again(scripted, waits):
    market, client = scripted("drop", (200, {"id": 3}))
    with pytest.raises(MarketUnreachable) as raised:
        client.job_cancel(3)
    assert raised.value.message.endswith(
        "The request may have arrived; check before sending it again."
    )
    assert len(market.received) == 1


def test_429_and_503_are_retried_for_any_request_after_the_retry_after_the_market_asks(
    scripted, waits
):
    market, client = scripted(
        (429, {"detail": "Request was throttled."}, {"Retry-After": "7"}),
        (503, {"detail": "Busy."}, {"Retry-After": "2"}),
        (503, {}),
        (200, {"id": 3, "status": "cancelled"}),
    )
    cancelled = client.job_cancel(3)
    assert (cancelled.id, cancelled.status) == (3, "cancelled")
    assert waits == [
        7.0,
        2.0,
        0.0,
    ]  # the market's Retry-After, then the client's own backoff (0 in these tests)
    assert len(market.received) == 4


def test_a_retry_after_longer_than_the_client_waits_raises_the_markets_sentence(scripted, waits):
    market, client = scripted(
        (
            429,
            {"detail": "Request was throttled. Expected available in 3600 seconds."},
            {"Retry-After": "3600"},
        )
    )
    with pytest.raises(ApiError) as raised:
        client.federations()
    assert (raised.value.status, raised.value.message) == (
        429,
        "Request was throttled. Expected available in 3600 seconds.",
    )
    assert len(market.received) == 1 and waits == []


def test_a_post_that_never_reached_the_market_is_retried():
    client = OnefoldClient(
        "http://127.0.0.1:9", "token", retries=2, backoff_seconds=0, timeout_seconds=2
    )
    with pytest.raises(MarketUnreachable) as raised:
        client.job_cancel(3)
    assert raised.value.message == (
        "Could not reach the market at http://127.0.0.1:9/ after 3 attempt(s) "
        "(ConnectionError); check the address and that the market is running."
    )


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_seconds("7") == 7.0
    assert (
        retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    )  # a moment already past: retry now
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_answers_come_back_as_typed_results_that_keep_the_whole_answer(scripted):
    profile_answer = {
        "username": "sam-silo",
        "is_operator": False,
        "organisation": {"id": 7, "name": "Northwind Hospital", "is_silo": True, "is_buyer": False},
    }
    catalog_answer = {
        "count": 3,
        "next": "http://x/api/listings/?offset=1",
        "previous": None,
        "results": [
            {
                "id": 2,
                "name": "Adult income",
                "price_cents": 1500,
                "global_model": 5,
                "accuracy": 0.84,
                "extra": 1,
            }
        ],
    }
    _, client = scripted(
        (200, profile_answer),
        (200, catalog_answer),
        (
            200,
            {
                "classes": [1, 0],
                "probabilities": [[0.2, 0.8], [0.9, 0.1]],
                "class_labels": ["<=50K", ">50K"],
            },
        ),
    )
    profile = client.me()
    assert (
        profile.username,
        profile.is_operator,
        profile.organisation.id,
        profile.organisation.name,
    ) == ("sam-silo", False, 7, "Northwind Hospital")
    assert profile.data == profile_answer
    page = client.listings(limit=1)
    assert (
        page.count,
        page.next,
        [(item.id, item.price_cents, item.accuracy, item.status) for item in page.results],
    ) == (3, "http://x/api/listings/?offset=1", [(2, 1500, 0.84, None)])
    assert page.results[0].data["extra"] == 1
    prediction = client.predict(5, [{"age": 40}])
    assert (prediction.classes, prediction.class_labels) == ([1, 0], ["<=50K", ">50K"])


def test_waiting_for_an_augmentation_ends_when_it_is_cancelled(scripted):
    augmentation = {
        "id": 4, "federation": "digits", "name": "FAug", "n_features": 4, "status_reason": "",
        "private": False, "generator": "ctgan", "epsilon": None, "generator_spec": None, "seeds": [],
    }  # fmt: skip
    market, client = scripted(
        (200, {**augmentation, "status": "training"}),
        (200, {**augmentation, "status": "cancelled"}),
    )
    ended = client.augmentation_wait(4, timeout_seconds=60, interval_seconds=0)
    assert ended.status == "cancelled" and len(market.received) == 2
