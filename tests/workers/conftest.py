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
    from celery import current_app

    from workers.celery_app import app as worker_app

    # The market publishes through Celery's current app (market.outbox); in a long test run that may be another
    # instance than the module's, so both are pointed at this broker.
    apps = {id(each): each for each in (worker_app, current_app._get_current_object())}.values()
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    originals = [(app, app.conf.broker_url, app.conf.broker_connection_timeout) for app in apps]
    settings.CELERY_BROKER_URL = url
    for app in apps:
        app.conf.broker_url = app.conf.broker_write_url = url
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
    for app, broker_url, connection_timeout in originals:
        app.conf.broker_url = app.conf.broker_write_url = broker_url
        app.conf.broker_connection_timeout = connection_timeout
        app._pool = None
        app.amqp._producer_pool = None
