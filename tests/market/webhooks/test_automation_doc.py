"""docs/automation.md's worked example, run exactly as shown: register an endpoint with curl, start the receiver,
ask for a test delivery; a real worker delivers it and the receiver prints it once verified."""

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from market.accounts.services import api_token_create
from market.webhooks.models import WebhookDelivery
from tests.conftest import running_celery_worker, scaled_timeout, wait_until
from tests.fixtures.webhooks import webhook_worker_environment

pytestmark = pytest.mark.django_db(transaction=True)
REPOSITORY = Path(__file__).resolve().parents[3]
DOC = REPOSITORY / "docs" / "automation.md"


def example_blocks() -> dict[str, str]:
    """The fenced blocks of the doc that follow an ``<!-- automation-example: NAME -->`` marker."""
    pattern = re.compile(r"<!-- automation-example: (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)
    return {name: code for name, code in pattern.findall(DOC.read_text())}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_worked_example_registers_receives_and_verifies_a_delivery(
    live_server,  # noqa: F811
    webhooks_reach_localhost,
    media_root,
    silo_user,
    tmp_path,
):
    blocks = example_blocks()
    assert sorted(blocks) == ["ping", "receiver.py", "register", "start"]
    port = free_port()
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPOSITORY),
        "ONEFOLD_URL": live_server.url,
        "ONEFOLD_TOKEN": api_token_create(user=silo_user, name="automation")[1],
        "RECEIVER_URL": f"http://127.0.0.1:{port}/onefold",
        "PORT": str(port),
    }

    def run(name: str) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", blocks[name]],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=scaled_timeout(60),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("register")
    (tmp_path / "receiver.py").write_text(blocks["receiver.py"])
    output = tmp_path / "receiver.out"
    with open(output, "w") as printed, open(tmp_path / "receiver.log", "w") as access_log:
        receiver = subprocess.Popen(
            ["bash", "-c", blocks["start"]],
            cwd=tmp_path,
            env=environment,
            stdout=printed,
            stderr=access_log,  # http.server's access log
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0,
            timeout=scaled_timeout(30),
            message="the receiver did not start",
        )
        worker_environment = webhook_worker_environment(webhooks_reach_localhost, media_root)
        with running_celery_worker(worker_environment, tmp_path / "worker.log"):
            run("ping")
            wait_until(
                lambda: output.read_text().strip(),
                timeout=scaled_timeout(60),
                message="the receiver printed no delivery",
            )
    finally:
        os.killpg(receiver.pid, signal.SIGTERM)
        receiver.wait()
    delivery = WebhookDelivery.objects.get()
    assert output.read_text().splitlines() == [
        f'webhook.ping {delivery.uuid} {{"endpoint": {delivery.endpoint_id}}}'
    ]
    assert delivery.status == "succeeded"
    assert delivery.attempt_log.get().response_status == 204
