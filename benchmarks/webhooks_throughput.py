"""Webhook deliveries at the receiver's pace (issue 42 item 3): deliveries per second through the outbox against one
plain client loop to the same receiver, and event → first attempt with one ``messages`` worker beside two
CPU-bound processes, all in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_webhooks_throughput CELERY_BROKER_URL=redis://127.0.0.1:6379/11 \\
        nice -n 10 .venv/bin/python benchmarks/webhooks_throughput.py > benchmarks/webhooks_throughput.md

The database named in DATABASE_URL is dropped, created and migrated; the Redis database in CELERY_BROKER_URL is
the broker (purged first). The receiver is one real HTTP/1.1 server on 127.0.0.1 in this process (so the run sets
ONEFOLD_WEBHOOK_ALLOW_PRIVATE and ONEFOLD_WEBHOOK_ALLOW_HTTP); the worker is a real Celery process started as
docs/scaling.md starts the ``messages`` worker (``-Q messages,maintenance --concurrency 2``).

1. *Plain client loop*: ``DELIVERIES`` POSTs of a signed-size body, one after another, each on a new connection
   (``http.client``), to the receiver; measured before and after the outbox phase, and the mean taken.
2. *Outbox*: ``CHANGES`` committed changes, each one event to ``ENDPOINTS`` endpoints (all at the same receiver,
   a path each), so ``CHANGES × ENDPOINTS = DELIVERIES`` deliveries; from the first commit to the last delivery
   recorded as succeeded. The changes are committed by this process while the worker delivers.
3. *Latency*: ``LATENCY_EVENTS`` events to one endpoint, each committed alone, one every ``LATENCY_SPACING`` s, with
   two processes spinning on the CPU for the whole phase; the time from the commit to the receiver's reading.
"""

import os
import statistics
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from webhooks import percentile, recreate_database, start_worker, stop  # noqa: E402 (benchmarks/webhooks.py, beside this script)

CHANGES = int(os.environ.get("ONEFOLD_BENCH_CHANGES", "50"))
ENDPOINTS = int(os.environ.get("ONEFOLD_BENCH_ENDPOINTS", "20"))
DELIVERIES = CHANGES * ENDPOINTS
LATENCY_EVENTS = int(os.environ.get("ONEFOLD_BENCH_LATENCY_EVENTS", "100"))
LATENCY_SPACING = 0.1
DEADLINE_SECONDS = 300
WORKER = ["-Q", "messages,maintenance", "--concurrency", "2"]  # docs/scaling.md's messages worker
SETTINGS = {
    "ONEFOLD_DEBUG": "true",
    "ONEFOLD_LOG_LEVEL": "WARNING",
    "ONEFOLD_WEBHOOK_ALLOW_PRIVATE": "true",
    "ONEFOLD_WEBHOOK_ALLOW_HTTP": "true",
}


class Receiver:
    """An HTTP/1.1 server on 127.0.0.1 that answers 200 and records each delivery's first arrival."""

    def __init__(self):
        self.arrivals: dict[str, float] = {}
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                delivery, now = self.headers.get("Onefold-Delivery", ""), time.time()
                with receiver.lock:
                    receiver.requests += 1
                    receiver.arrivals.setdefault(delivery, now)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *arguments):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"


def plain_client_loop(receiver: Receiver, count: int) -> float:
    """POSTs per second by one loop opening a connection per POST."""
    body = b'{"data":{"job":{"id":1}},"id":"00000000-0000-0000-0000-000000000000","type":"job.succeeded"}'
    started = time.perf_counter()
    for _ in range(count):
        connection = HTTPConnection("127.0.0.1", receiver.port, timeout=10)
        connection.request(
            "POST", "/plain", body=body, headers={"Content-Type": "application/json"}
        )
        connection.getresponse().read()
        connection.close()
    return count / (time.perf_counter() - started)


def emit_one(number: int) -> None:
    from django.db import transaction

    from market.webhooks.events import WebhookEvent
    from market.webhooks.services import webhook_events_emit

    with transaction.atomic():
        webhook_events_emit(
            [WebhookEvent("job.succeeded", {"job": {"id": number}}, lambda _: True)]
        )


def endpoints_at(organisation, urls: list[str]) -> list:
    from market.webhooks.models import WebhookEndpoint

    return [
        WebhookEndpoint.objects.create(
            organisation=organisation, url=url, events=["job.succeeded"], secret="whsec_bench"
        )
        for url in urls
    ]


def _wait_all_succeeded(endpoints: list) -> int:
    from market.webhooks.models import DeliveryStatus, WebhookDelivery

    deadline, succeeded = time.time() + DEADLINE_SECONDS, 0
    while time.time() < deadline:
        succeeded = WebhookDelivery.objects.filter(
            endpoint__in=endpoints, status=DeliveryStatus.SUCCEEDED
        ).count()
        if succeeded == DELIVERIES:
            break
        time.sleep(0.05)
    return succeeded


def _retire(endpoints: list) -> None:
    for endpoint in endpoints:
        endpoint.is_active = False  # the next phase has endpoints of its own
        endpoint.save(update_fields=["is_active"])


def backlog_phase(organisation, receiver: Receiver, folder: Path) -> dict:
    """Changes committed with no worker up; then one worker delivers the backlog: from its first attempt's start
    to its last delivery's record, read from the attempts and deliveries it wrote."""
    from django.db.models import Max, Min

    from market.webhooks.models import WebhookAttempt, WebhookDelivery

    endpoints = endpoints_at(organisation, [receiver.url(f"backlog/{n}") for n in range(ENDPOINTS)])
    started = time.perf_counter()
    for number in range(CHANGES):
        emit_one(number)
    committed = time.perf_counter() - started
    worker = start_worker(WORKER, folder / "backlog-worker.log", SETTINGS)
    try:
        succeeded = _wait_all_succeeded(endpoints)
    finally:
        stop(worker)
    _retire(endpoints)
    first = WebhookAttempt.objects.filter(delivery__endpoint__in=endpoints).aggregate(
        first=Min("started_at")
    )["first"]
    last = WebhookDelivery.objects.filter(endpoint__in=endpoints).aggregate(
        last=Max("delivered_at")
    )["last"]
    return {
        "committed": committed,
        "delivering": (last - first).total_seconds(),
        "succeeded": succeeded,
    }


def live_phase(organisation, receiver: Receiver, folder: Path) -> dict:
    """The worker up while this process commits the changes: from the first commit to the last success."""
    endpoints = endpoints_at(organisation, [receiver.url(f"live/{n}") for n in range(ENDPOINTS)])
    worker = start_worker(WORKER, folder / "live-worker.log", SETTINGS)
    try:
        started = time.perf_counter()
        for number in range(CHANGES):
            emit_one(number)
        committed = time.perf_counter() - started
        succeeded = _wait_all_succeeded(endpoints)
        finished = time.perf_counter() - started
    finally:
        stop(worker)
    _retire(endpoints)
    return {"committed": committed, "finished": finished, "succeeded": succeeded}


def latency_phase(organisation, receiver: Receiver, folder: Path) -> dict:
    from market.webhooks.models import WebhookDelivery

    (endpoint,) = endpoints_at(organisation, [receiver.url("latency")])
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]  # the two CPU-bound processes beside the worker
    worker = start_worker(WORKER, folder / "latency-worker.log", SETTINGS)
    committed: dict[str, float] = {}
    try:
        for number in range(LATENCY_EVENTS):
            emit_one(10**6 + number)
            committed[str(WebhookDelivery.objects.filter(endpoint=endpoint).latest("id").uuid)] = (
                time.time()
            )
            time.sleep(LATENCY_SPACING)
        deadline = time.time() + DEADLINE_SECONDS
        while not set(committed) <= set(receiver.arrivals) and time.time() < deadline:
            time.sleep(0.1)
    finally:
        stop(worker)
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    seconds = [
        receiver.arrivals[key] - at for key, at in committed.items() if key in receiver.arrivals
    ]
    return {
        "arrived": len(seconds),
        "p50": statistics.median(seconds),
        "p95": percentile(seconds, 0.95),
        "max": max(seconds),
    }


def main() -> None:
    import tempfile

    import django

    os.environ.update(SETTINGS)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    recreate_database(os.environ["DATABASE_URL"])
    django.setup()
    from market.accounts.services import organisation_create
    from workers.celery_app import app

    app.control.purge()
    organisation = organisation_create(name="Benchmark Clinic")
    folder = Path(tempfile.mkdtemp(prefix="webhooks-throughput-"))
    receiver = Receiver()
    load_before = os.getloadavg()
    plain_before = plain_client_loop(receiver, DELIVERIES)
    backlog = backlog_phase(organisation, receiver, folder)
    live = live_phase(organisation, receiver, folder)
    plain_after = plain_client_loop(receiver, DELIVERIES)
    latency = latency_phase(organisation, receiver, folder)
    load_after = os.getloadavg()
    print_report(plain_before, plain_after, backlog, live, latency, load_before, load_after)


def _met(ratio: float) -> str:
    return "met" if ratio >= 0.5 else "missed"


def print_report(
    plain_before, plain_after, backlog, live, latency, load_before, load_after
) -> None:
    plain = (plain_before + plain_after) / 2
    worker_rate = DELIVERIES / backlog["delivering"]
    live_rate = DELIVERIES / live["finished"]
    queueing_rate = DELIVERIES / backlog["committed"]
    print("# Webhook deliveries at the receiver's pace: benchmark (issue 42 item 3)\n")
    print(
        "```\nDATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_webhooks_throughput "
        "CELERY_BROKER_URL=redis://127.0.0.1:6379/11 \\\n"
        "    nice -n 10 .venv/bin/python benchmarks/webhooks_throughput.py > benchmarks/webhooks_throughput.md\n```\n"
    )
    print(
        f"One run of `benchmarks/webhooks_throughput.py` (what it measures: its docstring); {os.cpu_count()} CPUs "
        f"shared with other work; load average (1, 5, 15 min) {', '.join(f'{v:.1f}' for v in load_before)} before "
        f"and {', '.join(f'{v:.1f}' for v in load_after)} after. Receiver, PostgreSQL and Redis on the same "
        "machine.\n"
    )
    print("## Deliveries per second, the outbox against one plain client loop\n")
    print("| measure | value |\n|---|---|")
    for label, value in (
        ("deliveries", f"{DELIVERIES:,} ({CHANGES} changes × {ENDPOINTS} endpoints)"),
        ("worker", "one `messages` worker, prefork with 2 children"),
        (
            "plain client loop, a connection per POST (before / after; the mean is the divisor)",
            f"{plain_before:.0f} / {plain_after:.0f} POSTs/s",
        ),
        ("backlog: changes committed (no worker up) in", f"{backlog['committed']:.2f} s"),
        (
            "backlog: deliveries queued per second by this one committing process",
            f"{queueing_rate:.0f}",
        ),
        ("backlog: first attempt to last success", f"{backlog['delivering']:.2f} s"),
        ("backlog: deliveries succeeded", f"{backlog['succeeded']:,}"),
        ("backlog: deliveries/s by the worker", f"{worker_rate:.0f}"),
        (
            "**backlog: worker's deliveries/s ÷ plain client loop** (target ≥ 0.5)",
            f"**{worker_rate / plain:.2f}** ({_met(worker_rate / plain)})",
        ),
        ("live: changes committed while the worker delivers, in", f"{live['committed']:.2f} s"),
        ("live: first commit to last success", f"{live['finished']:.2f} s"),
        ("live: deliveries succeeded", f"{live['succeeded']:,}"),
        (
            "live: deliveries/s end to end ÷ plain client loop (bounded by the committing process)",
            f"{live_rate / plain:.2f} ({_met(live_rate / plain)})",
        ),
    ):
        print(f"| {label} | {value} |")
    print("\n## Event → first attempt, one `messages` worker, two CPU-bound processes beside it\n")
    print("| events | arrived | p50 | p95 | max | target p95 |\n|---|---|---|---|---|---|")
    met = "met" if latency["p95"] <= 2 else "missed"
    print(
        f"| {LATENCY_EVENTS} | {latency['arrived']} | {latency['p50']:.3f} s | {latency['p95']:.3f} s | "
        f"{latency['max']:.3f} s | ≤ 2 s ({met}) |"
    )


if __name__ == "__main__":
    main()
