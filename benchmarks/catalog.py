"""Catalog API under load: 10,000 listings, 50 concurrent clients, gunicorn on loopback.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_catalog_bench \\
        .venv/bin/python benchmarks/catalog.py > benchmarks/catalog.md

The database named in DATABASE_URL is dropped and created again, migrated, and filled with 10,000 published
listings (each with its job and global-model row). Gunicorn (gthread workers) serves the real settings with
DEBUG off. Fifty client threads, each on its own keep-alive connection with the same API token, request a fixed
mix of catalog queries (default page, search, filters, metric thresholds, orderings, deep offsets) for
``DURATION`` seconds after a warm-up; every response must be 200. The per-token API throttle is raised for the
run (it would otherwise cap one token at 600 requests a minute). The client runs on the same machine, so
its CPU use counts against the server's.
"""

import http.client
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
N_LISTINGS = 10_000
CLIENTS = 50
WARM_UP = 5.0
DURATION = float(os.environ.get("ONEFOLD_BENCH_SECONDS", "30"))
PORT = 8931
GUNICORN_WORKERS, GUNICORN_THREADS = 3, 8
QUERIES = [
    "/api/listings/",
    "/api/listings/?search=income",
    "/api/listings/?search=hospital&ordering=price",
    "/api/listings/?model_family=xgboost&privacy_level=L1",
    "/api/listings/?min_accuracy=0.85&ordering=-accuracy",
    "/api/listings/?min_price=1000&max_price=5000&ordering=-price",
    "/api/listings/?federation=adult-income&ordering=name&offset=5000",
    "/api/listings/?ordering=oldest&limit=100&offset=9000",
]
SERVER_ENV = {
    "ONEFOLD_DEBUG": "false", "ONEFOLD_SECRET_KEY": "benchmark-" + "k3y-" * 20, "ONEFOLD_SECURE_SSL_REDIRECT": "false",
    "ONEFOLD_SECURE_COOKIES": "false", "ONEFOLD_API_RATE_PER_TOKEN": "10000000/minute", "ONEFOLD_LOG_LEVEL": "WARNING",
}


def recreate_database(database_url: str) -> None:
    import psycopg

    parsed = urlparse(database_url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True,
                   env={**os.environ, "ONEFOLD_DEBUG": "true"})


def seed() -> str:
    """10,000 published listings over 10,000 global models; returns an API token of a buyer."""
    import django

    os.environ.setdefault("ONEFOLD_DEBUG", "true")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    django.setup()
    from django.utils import timezone

    from market.accounts.services import organisation_create, user_create, user_token
    from market.commerce.models import Listing
    from market.federations.models import EvaluationSplit, Federation, PublicDataset
    from market.jobs.models import GlobalModel, Job

    rng = random.Random(0)
    operator = user_create(username="bench-operator", password="bench-operator-password", is_operator=True)
    buyer = user_create(username="bench-buyer", password="bench-buyer-password",
                        organisation=organisation_create(name="Bench Buyer", is_buyer=True))
    federation = Federation.objects.create(slug="adult-income", name="Adult income", class_labels=["<=50K", ">50K"],
                                           allowed_privacy_levels=["L0", "L1", "L2"], default_privacy_level="L1",
                                           created_by=operator)
    public = PublicDataset.objects.create(federation=federation, content_sha256="0" * 64, features_sha256="0" * 64,
                                          features_file="none", feature_spec={}, source_format="csv", n_rows=1,
                                          n_features=98, uploaded_by=operator)
    split = EvaluationSplit.objects.create(federation=federation, public_dataset=public, content_sha256="0" * 64,
                                           data_file="none", n_rows=1, class_counts=[1, 1], uploaded_by=operator)
    families, levels = ["random_forest", "xgboost", "mlp", "ensemble"], ["L0", "L1", "L2"]
    words = ["income", "census", "hospital", "bank", "fused", "calibrated", "robust", "compact"]
    jobs = Job.objects.bulk_create(Job(federation=federation, kind="fedkt", privacy_level=levels[index % 3], seed=index,
                                       public_dataset=public, evaluation_split=split, requested_by=operator,
                                       status="succeeded") for index in range(N_LISTINGS))
    models = GlobalModel.objects.bulk_create(GlobalModel(
        job=job, federation=federation, model_family=families[index % 4], n_features=98, n_classes=2,
        metrics={"accuracy": 0.75 + 0.15 * rng.random()}, submission_metrics={}, privacy_report={}, lineage={},
        contribution_weights={}, contribution_rule="") for index, job in enumerate(jobs))
    now = timezone.now()
    Listing.objects.bulk_create(Listing(
        global_model=model, federation=federation, name=f"Model {index} {rng.choice(words)} {rng.choice(words)}",
        description=" ".join(rng.choice(words) for _ in range(12)), licence_text="Any lawful use.",
        price_cents=rng.randrange(100, 10_000), status="published", model_family=model.model_family,
        privacy_level=model.job.privacy_level, accuracy=model.metrics["accuracy"], created_by=operator,
        published_at=now) for index, model in enumerate(models))
    from django.db import connection

    with connection.cursor() as cursor:  # planner statistics, as autovacuum would gather on a live table
        cursor.execute("ANALYZE")
    return user_token(user=buyer)


def start_server(conn_max_age: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/gunicorn"), "market.wsgi", "-b", f"127.0.0.1:{PORT}", "-w", str(GUNICORN_WORKERS),
         "-k", "gthread", "--threads", str(GUNICORN_THREADS), "--keep-alive", "30", "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, **SERVER_ENV, "ONEFOLD_DB_CONN_MAX_AGE": str(conn_max_age)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            connection.request("GET", "/api/schema/")
            connection.getresponse().read()
            return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError("gunicorn did not start: " + server.stderr.read().decode()[-2000:])


def run_clients(token: str, clients: int, duration: float) -> tuple[list[float], dict[int, int]]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    start_barrier = threading.Barrier(clients + 1)
    timing = {}

    def client(number: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        headers = {"Authorization": f"Token {token}", "Connection": "keep-alive"}
        own_latencies, own_statuses = [], {}
        query_index = number
        start_barrier.wait()
        while time.monotonic() < timing["end"]:
            path = QUERIES[query_index % len(QUERIES)]
            query_index += 1
            started = time.monotonic()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            finished = time.monotonic()
            if started >= timing["measure_from"]:
                own_latencies.append(finished - started)
                own_statuses[response.status] = own_statuses.get(response.status, 0) + 1
        with lock:
            latencies.extend(own_latencies)
            for status, count in own_statuses.items():
                statuses[status] = statuses.get(status, 0) + count

    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    timing["measure_from"] = time.monotonic() + WARM_UP
    timing["end"] = timing["measure_from"] + duration
    start_barrier.wait()
    for thread in threads:
        thread.join()
    return latencies, statuses


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def row(conn_max_age: int, clients: int, seconds: float, latencies: list[float], statuses: dict[int, int]) -> str:
    milliseconds = [1000 * latency for latency in latencies]
    return (f"| {conn_max_age} | {clients} | {len(milliseconds):,} | {len(milliseconds) / seconds:,.1f} | "
            f"{statistics.median(milliseconds):.1f} | {percentile(milliseconds, 0.95):.1f} | "
            f"{percentile(milliseconds, 0.99):.1f} | {max(milliseconds):.1f} | "
            f"{', '.join(f'{status}: {count:,}' for status, count in sorted(statuses.items()))} |")


def main() -> None:
    recreate_database(os.environ["DATABASE_URL"])
    token = seed()
    load = os.getloadavg()[0]
    rows = []
    for conn_max_age in (0, 60):  # a new database connection per request (the default), or kept for 60 s
        server = start_server(conn_max_age)
        try:
            for clients, seconds in ((1, DURATION / 3), (CLIENTS, DURATION)):
                rows.append(row(conn_max_age, clients, seconds, *run_clients(token, clients, seconds)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    load_after = os.getloadavg()[0]
    print("# Catalog API benchmark\n")
    print(f"`GET /api/listings/` with {N_LISTINGS:,} published listings in PostgreSQL, gunicorn {GUNICORN_WORKERS} "
          f"gthread workers × {GUNICORN_THREADS} threads on 127.0.0.1, DEBUG off, token authentication; "
          f"keep-alive clients, each measured after a {WARM_UP:.0f} s warm-up. Query mix (round robin): "
          f"{', '.join(f'`{query}`' for query in QUERIES)}.\n")
    print("| `ONEFOLD_DB_CONN_MAX_AGE` | concurrent clients | requests | throughput (req/s) | p50 (ms) | p95 (ms) | "
          "p99 (ms) | max (ms) | statuses |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows) + "\n")
    print(f"Machine: {os.cpu_count()} CPU cores, **shared** with other sessions' processes during the run (1-minute "
          f"load average {load:.2f} before and {load_after:.2f} after the run); the client threads ran on the same "
          "cores as the server and PostgreSQL. Produced by `benchmarks/catalog.py`.")


if __name__ == "__main__":
    main()
