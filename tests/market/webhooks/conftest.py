"""A real HTTP receiver on 127.0.0.1 for webhook deliveries, and the settings that let the market call it."""

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    headers: dict
    body: bytes
    answered: int


@dataclass
class Receiver:
    """Answers each POST with the next status of ``answers`` (then 200); ``hold`` blocks answers while set."""

    url: str
    answers: list = field(default_factory=list)
    received: list = field(default_factory=list)
    hold: threading.Event | None = None
    arrived: threading.Event = field(default_factory=threading.Event)
    connections: int = 0  # TCP connections accepted

    def successes_per_delivery(self) -> dict:
        counts: dict = {}
        for request in self.received:
            if request.answered == 200:
                key = request.headers["Onefold-Delivery"]
                counts[key] = counts.get(key, 0) + 1
        return counts


def _serve(protocol_version: str):
    state: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def handle(self):
            state["receiver"].connections += 1
            super().handle()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            the_receiver = state["receiver"]
            the_receiver.arrived.set()
            if the_receiver.hold is not None:
                the_receiver.hold.wait()
            status = the_receiver.answers.pop(0) if the_receiver.answers else 200
            the_receiver.received.append(Received(dict(self.headers), body, status))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *arguments):
            pass

    Handler.protocol_version = protocol_version
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["receiver"] = Receiver(url=f"http://127.0.0.1:{server.server_port}/onefold")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state["receiver"]
    if state["receiver"].hold is not None:
        state["receiver"].hold.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def receiver():
    """A receiver that closes each connection after its answer (HTTP/1.0)."""
    yield from _serve("HTTP/1.0")


@pytest.fixture
def keep_alive_receiver():
    """A receiver that keeps connections open between requests (HTTP/1.1), counting the connections it accepts."""
    yield from _serve("HTTP/1.1")


WEBHOOK_TEST_SETTINGS = {
    "ONEFOLD_WEBHOOK_ALLOW_PRIVATE": True,
    "ONEFOLD_WEBHOOK_ALLOW_HTTP": True,
    "ONEFOLD_WEBHOOK_TIMEOUT_SECONDS": 3,
    "ONEFOLD_WEBHOOK_DELIVERY_SECONDS": 6,  # a held receiver's claim expires 16 s later, as the reaper test waits
    "ONEFOLD_WEBHOOK_RETRY_BASE_SECONDS": 1,
}


@pytest.fixture
def webhooks_reach_localhost(settings):
    """The deployment settings that let the market call the test's receiver (on 127.0.0.1, over http)."""
    for name, value in WEBHOOK_TEST_SETTINGS.items():
        setattr(settings, name, value)
    return settings


def webhook_worker_environment(settings, media_root) -> dict:
    from tests.conftest import worker_environment

    return {
        **worker_environment(settings, media_root),
        **{name: str(value).lower() for name, value in WEBHOOK_TEST_SETTINGS.items()},
    }
