"""The README's first command, `make demo`, on the embedded defaults (SQLite, filesystem broker) at a small size:
it prints the comparison table and the accounts, and keeps the market answering until interrupted."""

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import scaled_timeout, wait_until

ROOT = Path(__file__).resolve().parents[1]
SERVER_SETTINGS = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "DJANGO_SETTINGS_MODULE",
    "ONEFOLD_MEDIA_ROOT",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.worker
def test_make_demo_simulates_a_federation_on_embedded_defaults_and_leaves_the_market_running(
    tmp_path,
):
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if key not in SERVER_SETTINGS}
    environment.update(
        ONEFOLD_VAR_DIR=str(tmp_path / "var"), DEMO_PORT=str(port), DEMO_ARGS="--silos 3"
    )
    log = tmp_path / "make-demo.log"
    with open(log, "wb") as output:
        # -o: the venv is already installed (make test installs it first); never reinstall it from a test
        demo = subprocess.Popen(
            ["make", "--no-print-directory", "demo", "-o", ".venv/bin/.installed"],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: (
                re.search(rb"^Ctrl-C stops the market", log.read_bytes(), re.MULTILINE)
                or demo.poll() is not None
            ),  # the pattern is not make's echo
            timeout=900,
            interval=2,
            message="make demo did not start serving",
            progress=lambda: log.stat().st_size,
        )
        assert demo.poll() is None, log.read_text()
        text = log.read_text()
        assert "fedkt global model (job #1)" in text
        assert "SOLO (mean of 3 silos)" in text and "centralised (all silo data pooled)" in text
        # issue 39: the terminal says whether the model beats what the market has for free, with the interval
        assert "the operator's rows alone (no silo)" in text
        assert "Against the operator's rows alone: accuracy " in text
        assert "buyer:    buyer / onefold-buyer (Demo Buyer)" in text
        assert f"  Buyer     http://127.0.0.1:{port}/sign-in/?next=/market/purchases/" in text
        assert (
            requests.get(
                f"http://127.0.0.1:{port}/api/federations/", timeout=scaled_timeout(10)
            ).status_code
            == 401
        )
        assert demo.poll() is None  # still serving
    finally:
        stop_process_group(demo)


def stop_process_group(process: subprocess.Popen) -> None:
    """Ctrl-C for make and everything it started (web, worker), as a person would; then wait for all of them
    (a loaded machine may take minutes: the worker's warm shutdown finishes its task first), killing what is left."""
    os.killpg(process.pid, signal.SIGINT)
    deadline = time.monotonic() + scaled_timeout(300)
    while time.monotonic() < deadline:
        process.poll()  # reaps make once it exits: a zombie leader would keep its group alive
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
