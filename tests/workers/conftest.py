"""Fixtures of the worker tests: a broker of the test's own that is down until the test starts it."""

import socket
import subprocess

import pytest

from tests.conftest import wait_until


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def private_broker(transactional_db, settings, tmp_path):
    """A Redis of this test's own on a free port, stopped at first; the test process publishes to it and a worker
    started with ``settings`` uses it. Call the fixture's value to start it. Ask for this fixture after those that
    upload through the shared broker."""
    from workers.celery_app import app

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    original = app.conf.broker_url, app.conf.broker_connection_timeout
    app.conf.broker_url, app.conf.broker_write_url, settings.CELERY_BROKER_URL = url, url, url
    app.conf.broker_connection_timeout = 1
    app._pool = None
    app.amqp._producer_pool = None
    servers = []

    def start():
        servers.append(
            subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(tmp_path),
                ],
                stdout=subprocess.DEVNULL,
            )
        )
        wait_until(
            lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0,
            timeout=10,
            message="no redis",
        )

    yield start
    for server in servers:
        server.terminate()
        server.wait()
    app.conf.broker_url = app.conf.broker_write_url = original[0]
    app.conf.broker_connection_timeout = original[1]
    app._pool = None
    app.amqp._producer_pool = None
