"""The client's error and retry rules, against a scripted HTTP server standing in for a failing network or market.

(The real market is exercised in test_live_market.py; a live market cannot be made to answer 503 on demand.)
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.silo.client import ModelUpload, OnefoldClient
from workers.silo.errors import (Conflict, InvalidRequest, MarketUnreachable, NotFound, PermissionDenied, ServerError,
                                 error_for_status)


class ScriptedMarket:
    """Answers each request with the next scripted ``(status, JSON body)`` and records what it received."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.received = []
        market = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                market.received.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                        "body": self.rfile.read(length)})
                status, body = market.answers.pop(0)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = handle_any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    markets = []

    def start(*answers):
        markets.append(ScriptedMarket(answers))
        return markets[-1], OnefoldClient(markets[-1].url, "token-123", retries=3, backoff_seconds=0)
    yield start
    for market in markets:
        market.close()


def test_5xx_answers_are_retried_until_one_succeeds(scripted):
    market, client = scripted((503, {"detail": "busy"}), (502, {}), (200, [{"slug": "adult-income"}]))
    assert client.federations() == [{"slug": "adult-income"}]
    assert [request["path"] for request in market.received] == ["/api/federations/"] * 3
    assert market.received[0]["headers"]["Authorization"] == "Token token-123"


def test_a_market_failing_on_every_attempt_raises_server_error_with_its_message(scripted):
    market, client = scripted(*[(500, {"detail": "The database is down."})] * 4)
    with pytest.raises(ServerError) as raised:
        client.federations()
    assert (raised.value.status, raised.value.message) == (500, "The database is down.")
    assert len(market.received) == 4


@pytest.mark.parametrize(("status", "kind"), [(400, InvalidRequest), (403, PermissionDenied), (404, NotFound),
                                              (409, Conflict)])
def test_4xx_answers_are_never_retried_and_carry_the_markets_sentence(scripted, status, kind):
    market, client = scripted((status, {"detail": "Your organisation is not a member of 'x'; join it first."}))
    with pytest.raises(kind) as raised:
        client.federation("x")
    assert (raised.value.status, raised.value.message) == (status, "Your organisation is not a member of 'x'; join it first.")
    assert len(market.received) == 1


def test_field_errors_are_joined_into_one_sentence(scripted):
    _, client = scripted((400, {"n_local_examples": ["Ensure this value is greater than or equal to 1."],
                                "non_field_errors": ["Attach at least one model file."]}))
    with pytest.raises(InvalidRequest) as raised:
        client.federation_create(name="x")
    assert raised.value.message == ("n_local_examples: Ensure this value is greater than or equal to 1.; "
                                    "Attach at least one model file.")


def test_no_market_listening_raises_market_unreachable_after_every_retry():
    client = OnefoldClient("http://127.0.0.1:9", "token", retries=2, backoff_seconds=0, timeout_seconds=2)
    with pytest.raises(MarketUnreachable) as raised:
        client.federations()
    assert raised.value.message == ("Could not reach the market at http://127.0.0.1:9/ after 3 attempt(s) "
                                    "(ConnectionError); check the address and that the market is running.")
    assert raised.value.exit_code == 6


def test_a_retried_purchase_sends_the_same_idempotency_key(scripted):
    market, client = scripted((502, {}), (201, {"id": 9}))
    assert client.purchase(4) == {"id": 9}
    keys = [request["headers"]["Idempotency-Key"] for request in market.received]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 36


def test_a_retried_upload_sends_the_whole_body_again_and_reports_progress(scripted):
    market, client = scripted((503, {}), (201, {"id": 5, "status": "pending"}))
    seen = []
    answer = client.submission_create(federation="adult-income", files=[ModelUpload("s.onnx", b"x" * 300_000)],
                                      metadata={"model_family": "random_forest", "n_local_examples": 10,
                                                "label_distribution": [4, 6], "declared_epsilon": None},
                                      progress=lambda sent, total: seen.append((sent, total)))
    assert answer == {"id": 5, "status": "pending"}
    first, second = (request["body"] for request in market.received)
    assert len(first) == len(second) > 300_000
    assert b'name="label_distribution"\r\n\r\n[4, 6]\r\n' in second and b"declared_epsilon" not in second
    assert seen[-1][0] == seen[-1][1] == len(second)


def test_statuses_map_to_their_error_classes():
    assert type(error_for_status(413, "too big")).__name__ == "PayloadTooLarge"
    assert type(error_for_status(415, "pickle")).__name__ == "UnsupportedFormat"
    assert type(error_for_status(418, "teapot")).__name__ == "ApiError"
    assert error_for_status(503, "down").exit_code == 6
