"""Webhook deliveries: how soon an event's first attempt reaches its receiver, and whether 1,000 events to 20
endpoints, one of which fails for a while, all arrive exactly once.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_webhooks_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python benchmarks/webhooks.py > benchmarks/webhooks.md

The database named in DATABASE_URL is dropped, created and migrated; the Redis database in CELERY_BROKER_URL is
the broker (purged first). Receivers are real HTTP servers on 127.0.0.1 in this process (so the run sets
ONEFOLD_WEBHOOK_ALLOW_PRIVATE and ONEFOLD_WEBHOOK_ALLOW_HTTP); workers are real Celery processes.

1. *Latency*: one worker (solo pool), one endpoint; ``LATENCY_EVENTS`` events, each committed alone, one every
   ``LATENCY_SPACING`` seconds; the time from the commit to the receiver's reading the request.
2. *Fan-out with a failing endpoint*: ``EVENTS`` events, each to ``ENDPOINTS`` endpoints, committed in batches of
   50 (the issue asks for 1,000 events, 20,000 deliveries; on the shared 2-core machine one worker delivers about
   20 a second, so the default is 250 events, 5,000 deliveries, to stay under 10 minutes; set
   ONEFOLD_BENCH_EVENTS=1000 for the full count); one endpoint answers 503 for ``FAIL_SECONDS`` from the first commit (the issue's target says 5 minutes;
   the run scales it down to keep under 10 minutes, and says so). One worker process with ``CONCURRENCY``
   children; retries back off from 1 s. The endpoint-disabling limit is raised for the run, so that the failing
   endpoint catches up by itself (with the default, 50 failures in a row, it would be disabled and catch up when
   a member enables it again). Counted: deliveries that never succeeded (lost) and deliveries the receivers
   answered 2xx more than once (duplicated).
"""

import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LATENCY_EVENTS = int(os.environ.get("ONEFOLD_BENCH_LATENCY_EVENTS", "200"))
LATENCY_SPACING = 0.05
EVENTS = int(os.environ.get("ONEFOLD_BENCH_EVENTS", "250"))
ENDPOINTS = int(os.environ.get("ONEFOLD_BENCH_ENDPOINTS", "20"))
FAIL_SECONDS = int(os.environ.get("ONEFOLD_BENCH_FAIL_SECONDS", "120"))
CONCURRENCY = int(os.environ.get("ONEFOLD_BENCH_CONCURRENCY", "4"))
DEADLINE_SECONDS = 480
SETTINGS = {
    "ONEFOLD_DEBUG": "true",
    "ONEFOLD_LOG_LEVEL": "WARNING",
    "ONEFOLD_WEBHOOK_ALLOW_PRIVATE": "true",
    "ONEFOLD_WEBHOOK_ALLOW_HTTP": "true",
    "ONEFOLD_WEBHOOK_RETRY_BASE_SECONDS": "1",
    "ONEFOLD_WEBHOOK_MAX_ATTEMPTS": "12",
    "ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES": "1000000",
}


class Receiver:
    """An HTTP server on 127.0.0.1 that records each request's delivery id, arrival time and answer."""

    def __init__(self, failing_until: float = 0.0):
        self.failing_until = failing_until
        self.arrivals: dict[str, float] = {}
        self.successes: dict[str, int] = {}
        self.failures = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                delivery, now = self.headers["Onefold-Delivery"], time.time()
                status = 503 if now < receiver.failing_until else 200
                with receiver.lock:
                    receiver.arrivals.setdefault(delivery, now)
                    if status == 200:
                        receiver.successes[delivery] = receiver.successes.get(delivery, 0) + 1
                    else:
                        receiver.failures += 1
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *arguments):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def recreate_database(database_url: str) -> None:
    import psycopg

    parsed = urlparse(database_url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        check=True,
        env={**os.environ, **SETTINGS},
    )


def start_worker(pool: list[str], log: Path, settings: dict | None = None) -> subprocess.Popen:
    """A Celery worker with ``pool``'s options and the benchmark's ``settings`` (this script's by default), once it is
    ready; its output goes to ``log``."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", *pool]
        + ["--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        cwd=ROOT,
        env={**os.environ, **(SETTINGS if settings is None else settings)},
        stdout=open(log, "wb"),  # noqa: SIM115 (the worker writes it until it is stopped)
        stderr=subprocess.STDOUT,
    )
    while b" ready." not in log.read_bytes():
        if worker.poll() is not None:
            sys.exit(log.read_text())
        time.sleep(0.2)
    return worker


def stop(worker: subprocess.Popen) -> None:
    worker.terminate()
    worker.wait(timeout=60)


def endpoint_for(organisation, receiver: Receiver):
    from market.webhooks.models import WebhookEndpoint

    return WebhookEndpoint.objects.create(
        organisation=organisation, url=receiver.url, events=["job.succeeded"], secret="whsec_bench"
    )


def emit(count: int, start: int = 0) -> None:
    from django.db import transaction

    from market.webhooks.events import WebhookEvent
    from market.webhooks.services import webhook_events_emit

    with transaction.atomic():
        webhook_events_emit(
            [
                WebhookEvent("job.succeeded", {"job": {"id": start + number}}, lambda _: True)
                for number in range(count)
            ]
        )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def latency(organisation, folder: Path) -> dict:
    from market.webhooks.models import WebhookDelivery

    receiver = Receiver()
    endpoint = endpoint_for(organisation, receiver)
    worker = start_worker(["--pool", "solo"], folder / "latency-worker.log")
    committed = {}
    try:
        for number in range(LATENCY_EVENTS):
            emit(1, start=number)
            committed[str(WebhookDelivery.objects.filter(endpoint=endpoint).latest("id").uuid)] = (
                time.time()
            )
            time.sleep(LATENCY_SPACING)
        deadline = time.time() + DEADLINE_SECONDS
        while len(receiver.arrivals) < LATENCY_EVENTS and time.time() < deadline:
            time.sleep(0.2)
    finally:
        stop(worker)
        endpoint.is_active = False  # the fan-out's events are for its own 20 endpoints
        endpoint.save(update_fields=["is_active"])
    seconds = [
        receiver.arrivals[key] - committed[key] for key in committed if key in receiver.arrivals
    ]
    return {
        "events": LATENCY_EVENTS,
        "arrived": len(seconds),
        "p50": statistics.median(seconds),
        "p95": percentile(seconds, 0.95),
        "max": max(seconds),
    }


def fan_out(organisation, folder: Path) -> dict:
    from market.webhooks.models import DeliveryStatus, WebhookAttempt, WebhookDelivery

    started = time.time()
    receivers = [Receiver(failing_until=started + FAIL_SECONDS)] + [
        Receiver() for _ in range(ENDPOINTS - 1)
    ]
    endpoints = [endpoint_for(organisation, receiver) for receiver in receivers]
    worker = start_worker(
        ["--pool", "prefork", "--concurrency", str(CONCURRENCY)], folder / "fan-out-worker.log"
    )
    try:
        for start in range(0, EVENTS, 50):
            emit(min(50, EVENTS - start), start=start)
        emitted = time.time() - started
        expected = EVENTS * ENDPOINTS
        deadline = time.time() + DEADLINE_SECONDS
        succeeded = 0
        while time.time() < deadline:
            succeeded = WebhookDelivery.objects.filter(
                endpoint__in=endpoints, status=DeliveryStatus.SUCCEEDED
            ).count()
            if succeeded == expected:
                break
            time.sleep(1)
        finished = time.time() - started
    finally:
        stop(worker)
    failing = receivers[0]
    duplicated = sum(
        count - 1 for receiver in receivers for count in receiver.successes.values() if count > 1
    )
    return {
        "deliveries": expected,
        "emitted_seconds": emitted,
        "finished_seconds": finished,
        "succeeded": succeeded,
        "lost": expected - sum(len(receiver.successes) for receiver in receivers),
        "duplicated": duplicated,
        "recorded_successes": WebhookAttempt.objects.filter(
            delivery__endpoint__in=endpoints, succeeded=True
        ).count(),
        "failing_endpoint_failures": failing.failures,
        "failing_endpoint_caught_up": len(failing.successes) == EVENTS,
        "failing_last_success_seconds": max(
            WebhookDelivery.objects.filter(endpoint=endpoints[0]).values_list(
                "delivered_at", flat=True
            ),
            default=None,
        ),
        "started": started,
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
    folder = Path(tempfile.mkdtemp(prefix="webhooks-bench-"))
    first = latency(organisation, folder)
    print(f"latency: {first}", file=sys.stderr)
    second = fan_out(organisation, folder)
    last_success = second["failing_last_success_seconds"]
    caught_up_at = last_success.timestamp() - second["started"] if last_success else float("nan")
    print("# Webhook deliveries: benchmark\n")
    print(
        f"`benchmarks/webhooks.py`, one run; {os.cpu_count()} CPUs shared with other work. Receivers on "
        "127.0.0.1, PostgreSQL and Redis on the same machine.\n"
    )
    print("## Event to first attempt, one worker (solo pool)\n")
    print("| events | arrived | p50 | p95 | max | target p95 |\n|---|---|---|---|---|---|")
    print(
        f"| {first['events']} | {first['arrived']} | {first['p50']:.3f} s | {first['p95']:.3f} s | "
        f"{first['max']:.3f} s | ≤ 2 s |\n"
    )
    print(f"## {EVENTS:,} events to {ENDPOINTS} endpoints, one failing for {FAIL_SECONDS} s\n")
    print("| measure | value |\n|---|---|")
    for label, value in (
        ("deliveries", f"{second['deliveries']:,}"),
        ("worker", f"one, prefork with {CONCURRENCY} children"),
        ("all events committed after", f"{second['emitted_seconds']:.1f} s"),
        ("deliveries queued per second", f"{second['deliveries'] / second['emitted_seconds']:.0f}"),
        ("all deliveries succeeded after", f"{second['finished_seconds']:.1f} s"),
        (
            "every delivery succeeded before the deadline",
            "yes" if second["succeeded"] == second["deliveries"] else "no",
        ),
        ("lost (never answered 2xx)", second["lost"]),
        ("duplicated successful deliveries (receivers' count)", second["duplicated"]),
        ("successful attempts recorded", f"{second['recorded_successes']:,}"),
        ("failed attempts at the failing endpoint", second["failing_endpoint_failures"]),
        ("failing endpoint caught up", "yes" if second["failing_endpoint_caught_up"] else "no"),
        ("its last delivery succeeded after", f"{caught_up_at:.1f} s"),
    ):
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
