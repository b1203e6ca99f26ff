"""Catalog API under load: 10,000 listings, gunicorn on loopback, PostgreSQL, ``wrk`` as the load generator.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_catalog_bench ONEFOLD_CACHE_URL=redis://127.0.0.1:6379/4 \\
        .venv/bin/python benchmarks/catalog.py > benchmarks/catalog.md

Needs ``wrk`` (Debian: ``apt-get install wrk``). The database named in DATABASE_URL is dropped and created again,
migrated, and filled with 10,000 published listings (each with its job and global-model row); the Redis database in
ONEFOLD_CACHE_URL is the servers' cache (throttles and, where enabled, catalog pages) and is flushed before each
configuration. Gunicorn serves the real settings with DEBUG off and ``ONEFOLD_SERVER_TIMING=true``, once per
configuration (connections per request, kept or pooled, catalog cache off or on), ready once it answers one
catalog page (one probe at a time, each waited for, so none pile up on a loaded machine). For each one:

- *server time*: one client sends the query mix in turn (``PASSES`` rounds after one warm-up round) and reads each
  response's ``Server-Timing`` header: the time from the first middleware to the response, of which the database's;
- *load*: ``wrk`` (C, one thread) with 1 and then ``CLIENTS`` concurrent clients, each request the next of the
  mix (gunicorn's synchronous workers close each connection after its response; wrk opens the next), after a
  warm-up; latency percentiles, throughput and non-200 answers come from wrk's own counters.

The per-token API throttle is raised for the run (it would otherwise cap one token at 600 requests a minute). wrk
runs on the same machine, so its CPU use counts against the server's (it is far cheaper than the server).
"""

import http.client
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
N_LISTINGS = 10_000
CLIENTS = 50
WARM_UP_SECONDS = 3
DURATION = int(os.environ.get("ONEFOLD_BENCH_SECONDS", "20"))
PASSES = 30
PORT = int(
    os.environ.get("ONEFOLD_BENCH_PORT", "8931")
)  # another port where another run holds this one
# Readiness: a cheap catalog page, the start-up it may take on a loaded machine, the longest pause between probes.
READY_PATH, READY_SECONDS, READY_MAX_PAUSE_SECONDS = "/api/listings/?limit=1", 300, 5.0
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
    "ONEFOLD_DEBUG": "false",
    "ONEFOLD_SECRET_KEY": "benchmark-" + "k3y-" * 20,
    "ONEFOLD_SECURE_SSL_REDIRECT": "false",
    "ONEFOLD_SECURE_COOKIES": "false",
    "ONEFOLD_LOG_LEVEL": "WARNING",
    "ONEFOLD_SERVER_TIMING": "true",
    # Rates that never refuse the benchmark's single token.
    "ONEFOLD_API_RATE_PER_TOKEN": "1000000/second",
    "ONEFOLD_API_RATE_PER_USER": "1000000/second",
}
# (what is measured, the server's environment): the catalog cache needs a shared cache (ONEFOLD_CACHE_URL).
CONFIGURATIONS = [
    (
        "a connection per request, no catalog cache",
        {"ONEFOLD_DB_CONN_MAX_AGE": "0", "ONEFOLD_CATALOG_CACHE_SECONDS": "0"},
    ),
    (
        "persistent connections, no catalog cache",
        {"ONEFOLD_DB_CONN_MAX_AGE": "60", "ONEFOLD_CATALOG_CACHE_SECONDS": "0"},
    ),
    (
        "pooled connections (4 per process), no catalog cache",
        {"ONEFOLD_DB_POOL_MAX_SIZE": "4", "ONEFOLD_CATALOG_CACHE_SECONDS": "0"},
    ),
    (
        "pooled connections (4 per process), catalog cache",
        {"ONEFOLD_DB_POOL_MAX_SIZE": "4"},
    ),
    ("persistent connections, catalog cache (the defaults)", {}),
]
TARGET_MEDIAN_MS, TARGET_P95_MS, TARGET_THROUGHPUT = 5.0, 100.0, 500
TARGET_SERVER_OVER_WRK = (
    10  # issue 42: server CPU per request at most ten times the load generator's
)
WRK_SCRIPT = """
local paths = {%(paths)s}
local counter = 0
wrk.headers["Authorization"] = "Token " .. os.getenv("CATALOG_TOKEN")
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter %% #paths) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format('RESULT {"requests": %%d, "microseconds": %%d, "p50": %%d, "p95": %%d, "p99": %%d, ' ..
    '"max": %%d, "non_2xx": %%d, "socket_errors": %%d}\\n', summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


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
        env={**os.environ, "ONEFOLD_DEBUG": "true"},
    )


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
    operator = user_create(
        username="bench-operator", password="bench-operator-password", is_operator=True
    )
    buyer = user_create(
        username="bench-buyer",
        password="bench-buyer-password",
        organisation=organisation_create(name="Bench Buyer", is_buyer=True),
    )
    federation = Federation.objects.create(
        slug="adult-income",
        name="Adult income",
        class_labels=["<=50K", ">50K"],
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L1",
        created_by=operator,
    )
    public = PublicDataset.objects.create(
        federation=federation,
        content_sha256="0" * 64,
        features_sha256="0" * 64,
        features_file="none",
        feature_spec={},
        source_format="csv",
        n_rows=1,
        n_features=98,
        uploaded_by=operator,
    )
    split = EvaluationSplit.objects.create(
        federation=federation,
        public_dataset=public,
        content_sha256="0" * 64,
        data_file="none",
        n_rows=1,
        class_counts=[1, 1],
        uploaded_by=operator,
    )
    families, levels = ["random_forest", "xgboost", "mlp", "ensemble"], ["L0", "L1", "L2"]
    words = ["income", "census", "hospital", "bank", "fused", "calibrated", "robust", "compact"]
    jobs = Job.objects.bulk_create(
        Job(
            federation=federation,
            kind="fedkt",
            privacy_level=levels[index % 3],
            seed=index,
            public_dataset=public,
            evaluation_split=split,
            requested_by=operator,
            status="succeeded",
        )
        for index in range(N_LISTINGS)
    )
    models = GlobalModel.objects.bulk_create(
        GlobalModel(
            job=job,
            federation=federation,
            model_family=families[index % 4],
            n_features=98,
            n_classes=2,
            metrics={"accuracy": 0.75 + 0.15 * rng.random()},
            submission_metrics={},
            privacy_report={},
            lineage={},
            contribution_weights={},
            contribution_rule="",
        )
        for index, job in enumerate(jobs)
    )
    now = timezone.now()
    Listing.objects.bulk_create(
        Listing(
            global_model=model,
            federation=federation,
            name=f"Model {index} {rng.choice(words)} {rng.choice(words)}",
            description=" ".join(rng.choice(words) for _ in range(12)),
            licence_text="Any lawful use.",
            price_cents=rng.randrange(100, 10_000),
            status="published",
            model_family=model.model_family,
            privacy_level=model.job.privacy_level,
            accuracy=model.metrics["accuracy"],
            created_by=operator,
            published_at=now,
        )
        for index, model in enumerate(models)
    )
    from django.db import connection

    # planner statistics, as autovacuum would gather on a live table
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return user_token(user=buyer)


def start_server(environment: dict[str, str], token: str) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "-c",
            "docker/gunicorn.conf.py",  # the deployed layout
            "-b",
            f"127.0.0.1:{PORT}",
            "--log-level",
            "warning",
            "market.wsgi",
        ],
        cwd=ROOT,
        env={**os.environ, **SERVER_ENV, **environment},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_ready(server, token)
    except RuntimeError:
        server.kill()
        raise
    return server


def wait_until_ready(server: subprocess.Popen, token: str) -> None:
    """Until one catalog page is answered 200: one probe at a time, each waited for as long as the start-up may
    still take, pausing longer after each refusal. On a loaded machine a worker's first request imports most of
    the code; a probe given up early would leave that request running in the worker and the next one queued
    behind it (what asking for the schema every 0.5 s with a 2 s timeout did)."""
    deadline, pause, last = time.monotonic() + READY_SECONDS, 0.25, "no answer"
    while server.poll() is None and (remaining := deadline - time.monotonic()) > 0:
        connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=remaining)
        try:
            connection.request("GET", READY_PATH, headers={"Authorization": f"Token {token}"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                return
            last = f"{READY_PATH} answered {response.status}"
        except OSError as error:  # not listening yet (refused), or the deadline passed (timeout)
            last = f"{READY_PATH}: {error}"
        finally:
            connection.close()
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(2 * pause, READY_MAX_PAUSE_SECONDS)
    if server.poll() is None:
        raise RuntimeError(f"gunicorn was not ready after {READY_SECONDS} s ({last}).")
    raise RuntimeError("gunicorn did not start: " + server.stderr.read().decode()[-2000:])


def server_layout() -> str:
    """How many gunicorn processes and threads ``docker/gunicorn.conf.py`` starts on this machine."""
    printed = subprocess.run(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "-c",
            "docker/gunicorn.conf.py",
            "--print-config",
            "market.wsgi",
        ],
        cwd=ROOT,
        env={**os.environ, **SERVER_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    setting = dict(re.findall(r"^(workers|worker_class) +=\s*(\S+)", printed, re.MULTILINE))
    return f"{setting['workers']} {setting['worker_class']} worker processes"


def flush_cache() -> None:
    import redis

    if os.environ.get("ONEFOLD_CACHE_URL"):
        redis.Redis.from_url(os.environ["ONEFOLD_CACHE_URL"]).flushdb()


SERVER_TIMING = re.compile(
    r'db;dur=([0-9.]+);desc="([0-9]+) queries", app;dur=([0-9.]+), total;dur=([0-9.]+)'
)


def server_times(token: str) -> dict[str, list[tuple[float, float, int]]]:
    """Per query of the mix: (total ms, database ms, queries) of ``PASSES`` sequential requests after a warm-up."""
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    headers = {"Authorization": f"Token {token}"}
    times: dict[str, list[tuple[float, float, int]]] = {query: [] for query in QUERIES}
    for round_number in range(PASSES + 1):
        for query in QUERIES:
            connection.request("GET", query, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{query} answered {response.status}")
            total, database, queries = _parsed_timing(response.getheader("Server-Timing") or "")
            if round_number:
                times[query].append((total, database, queries))
    return times


def _parsed_timing(header: str) -> tuple[float, float, int]:
    match = SERVER_TIMING.search(header)
    if match is None:
        raise RuntimeError(f"No Server-Timing header in the response (got {header!r}).")
    return float(match.group(4)), float(match.group(1)), int(match.group(2))


def process_cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds each process has used so far (``/proc/<pid>/stat``); gone ones are left out."""
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def cpu_used(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds the processes alive now used since ``before`` (new ones: all of theirs)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in process_cpu_seconds(pids).items())


def server_pids(server: subprocess.Popen) -> list[int]:
    children = subprocess.run(
        ["pgrep", "-P", str(server.pid)], capture_output=True, text=True
    ).stdout
    return [server.pid, *map(int, children.split())]


def database_pids() -> list[int]:
    """The PostgreSQL backends serving the benchmark's database (the server's connections)."""
    import psycopg

    name = urlparse(os.environ["DATABASE_URL"]).path.lstrip("/")
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchall()
    return [pid for (pid,) in rows]


def run_wrk_with_cpu(token: str, script: Path, server: subprocess.Popen, seconds: int) -> dict:
    """``run_wrk`` with ``CLIENTS`` connections, plus the CPU seconds the server, its database backends and wrk
    used meanwhile (backends that closed before the end are not counted: with a connection per request the
    database's share is missing)."""
    gunicorn = server_pids(server)
    before = process_cpu_seconds(gunicorn), process_cpu_seconds(database_pids())
    wrk_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_wrk(token, script, CLIENTS, seconds)
    wrk_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_server"] = cpu_used(before[0], gunicorn)
    result["cpu_database"] = cpu_used(before[1], database_pids())
    result["cpu_wrk"] = (wrk_after.ru_utime + wrk_after.ru_stime) - (
        wrk_before.ru_utime + wrk_before.ru_stime
    )
    return result


def run_wrk(token: str, script: Path, clients: int, seconds: int) -> dict:
    command = [
        "wrk",
        "-t1",
        f"-c{clients}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        f"http://127.0.0.1:{PORT}",
    ]
    output = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CATALOG_TOKEN": token},
    ).stdout
    return json.loads(output.split("RESULT ", 1)[1].strip())


def measure(token: str, script: Path, environment: dict[str, str]) -> dict:
    flush_cache()
    server = start_server(environment, token)
    try:
        timings = server_times(token)
        run_wrk(token, script, CLIENTS, WARM_UP_SECONDS)
        single = run_wrk(token, script, 1, max(5, DURATION // 2))
        loaded = run_wrk_with_cpu(token, script, server, DURATION)
    finally:
        server.terminate()
        try:
            server.wait(
                timeout=120
            )  # gunicorn's graceful stop takes longer than 30 s on a loaded machine
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {"timings": timings, "single": single, "loaded": loaded}


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timing_row(label: str, query: str, samples: list[tuple[float, float, int]]) -> str:
    totals = sorted(sample[0] for sample in samples)
    return (
        f"| {label} | {query} | {median_of(totals):.2f} | {median_of([sample[1] for sample in samples]):.2f} | "
        f"{median_of([sample[0] - sample[1] for sample in samples]):.2f} | "
        f"{median_of([sample[2] for sample in samples]):.0f} | {totals[int(0.95 * len(totals))]:.2f} |"
    )


def timing_rows(label: str, timings: dict[str, list[tuple[float, float, int]]]) -> list[str]:
    everything = [sample for samples in timings.values() for sample in samples]
    return [timing_row(f"**{label}**", "**all**", everything)] + [
        timing_row("", f"`{query.removeprefix('/api/listings/') or '(default page)'}`", samples)
        for query, samples in timings.items()
    ]


def load_row(label: str, clients: int, result: dict) -> str:
    seconds = result["microseconds"] / 1e6
    return (
        f"| {label} | {clients} | {result['requests']:,} | {result['requests'] / seconds:,.0f} | "
        f"{result['p50'] / 1000:.1f} | {result['p95'] / 1000:.1f} | {result['p99'] / 1000:.1f} | "
        f"{result['max'] / 1000:.1f} | {result['non_2xx']} | {result['socket_errors']} |"
    )


def cpu_per_request_ms(result: dict) -> float:
    return (
        1000
        * (result["cpu_server"] + result["cpu_database"] + result["cpu_wrk"])
        / result["requests"]
    )


def cpu_row(label: str, result: dict) -> str:
    requests = result["requests"]
    return (
        f"| {label} | {1000 * result['cpu_server'] / requests:.2f} | "
        f"{1000 * result['cpu_database'] / requests:.2f} | {1000 * result['cpu_wrk'] / requests:.2f} | "
        f"{cpu_per_request_ms(result):.2f} | {2000 / cpu_per_request_ms(result):,.0f} |"
    )


# ONEFOLD_BENCH_CONFIGURATIONS=1 runs only the defaults (the last configuration): a few minutes on a loaded machine.
CONFIGURATIONS_RUN = int(os.environ.get("ONEFOLD_BENCH_CONFIGURATIONS", str(len(CONFIGURATIONS))))


def main() -> None:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk).")
    if not os.environ.get("ONEFOLD_CACHE_URL", "").startswith("redis://"):
        sys.exit(
            "Set ONEFOLD_CACHE_URL to a Redis database the benchmark may flush, e.g. redis://127.0.0.1:6379/4."
        )
    recreate_database(os.environ["DATABASE_URL"])
    token = seed()
    script = Path(tempfile.mkdtemp()) / "catalog.lua"
    script.write_text(WRK_SCRIPT % {"paths": ", ".join(f'"{query}"' for query in QUERIES)})
    started, load_before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]
    results = [
        (label, measure(token, script, environment))
        for label, environment in CONFIGURATIONS[-CONFIGURATIONS_RUN:]
    ]
    load_after = os.getloadavg()[0]
    print_report(results, started, load_before, load_after)


def print_report(
    results: list[tuple[str, dict]], started: str, load_before: float, load_after: float
) -> None:
    print("# Catalog API benchmark\n")
    print(
        f"`GET /api/listings/` with {N_LISTINGS:,} published listings in PostgreSQL 15, gunicorn as "
        f"`docker/gunicorn.conf.py` lays it out ({server_layout()}) on 127.0.0.1, DEBUG off, token authentication, Redis as the "
        f"cache. Query mix (each client takes the next in turn): "
        f"{', '.join(f'`{query}`' for query in QUERIES)}. Produced by `benchmarks/catalog.py` (run of {started}); "
        f"rerun with the command in its docstring.\n"
    )
    print("## Server time per request (one client, `Server-Timing` header)\n")
    print(
        f"Medians of {PASSES} requests per query after one warm-up round: *total* from the first middleware to the "
        "response, of which *database* (SQL statements sent and answered) and *rest* (Django, DRF, authentication, "
        "throttle, cache, JSON).\n"
    )
    print(
        "| configuration | query | total p50 (ms) | database p50 (ms) | rest p50 (ms) | SQL statements | "
        "total p95 (ms) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, result in results:
        print("\n".join(timing_rows(label, result["timings"])))
    print(
        "\n## Under load (`wrk`, each client's request the next of the mix; the server closes each connection after "
        "its response and wrk opens the next)\n"
    )
    print(
        "| configuration | connections | requests | throughput (req/s) | p50 (ms) | p95 (ms) | p99 (ms) | max (ms) | "
        "non-200 | socket errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, result in results:
        print(load_row(label, 1, result["single"]))
        print(load_row(label, CLIENTS, result["loaded"]))
    print(
        f"\n**CPU per request** with {CLIENTS} connections: CPU time (user + system) the gunicorn processes, their "
        "PostgreSQL backends and wrk used during the run, divided by the requests answered. Unlike latency, it "
        "hardly depends on what else runs on the machine, so it bounds what two idle cores can serve: "
        "2 cores ÷ CPU per request. Not counted: Redis (shared with other processes), and in the first "
        "configuration the backends that closed after each request.\n"
    )
    print(
        "| configuration | server (ms) | PostgreSQL (ms) | wrk (ms) | total (ms) | "
        "2 idle cores could serve (req/s) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, result in results:
        print(cpu_row(label, result["loaded"]))
    print(
        f"\nMachine: {os.cpu_count()} CPU cores; 1-minute load average {load_before:.2f} before and "
        f"{load_after:.2f} after the run (above 0 means other processes shared the cores with the server, PostgreSQL "
        "and wrk).\n"
    )
    print_targets(results[-1][1])
    if load_before > 1.5:
        print(
            f"\n**This run shared the machine** (load average {load_before:.1f} on {os.cpu_count()} cores): the "
            "server had a fraction of the cores, so times are longer and throughput lower than the same code gets "
            "alone; rerun on a quiet machine to read the targets."
        )
    print(READING)


READING = """
## What a catalog request does

- **Cache hit** (the usual case): one SQL statement, the API token's lookup (authentication is never cached, so a
  revoked token stops working at once), then the page from Redis as the JSON bytes to send. The key is the
  catalog's version, the audience (operators see every status; everyone else published listings only, the one rule
  of `listing_list`) and the request (filters, limit, offset, and the address and media type the next/previous
  links and the rendering depend on). Every service that writes a listing (`listing_create`, `listing_publish`,
  `listing_retire`) moves the version when its transaction commits, so the next request reads the database
  (`tests/market/commerce/test_catalog_cache.py`). `ONEFOLD_CATALOG_CACHE_SECONDS` (default 60 with
  `ONEFOLD_CACHE_URL`, 0 without: the version must be shared by every web process).
- **What a hit costs**, and what was cut (in-process CPU per request, measured with cProfile and by leaving each
  part out): the token lookup through the ORM compiled a three-table join every time (0.42 ms of 1.41 ms; now one
  statement written once per process, `market/accounts/selectors.py`); DRF's throttle read and wrote the time of
  every request of the period, pickled (0.04 ms more than one number per client, `SteadyRateThrottle`); rendering
  the page and building its links (0.20 ms; now cached rendered). What is left, about 0.76 ms in-process: Django's
  and DRF's request handling, the middleware, the connection health check, and two Redis round trips: the
  throttle (one script takes the user's and the token's rates; before issue 42 the default cache's proxy sent it
  down the in-memory path, a read and a write per rate, four round trips) and the page (one).
- **The web server's layout** (`docker/gunicorn.conf.py`, used here and by the Dockerfile and compose file):
  synchronous workers, one more than the cores. With the same code, threaded workers (2 processes × 2 or 4
  threads, keep-alive) gave 1,120–1,370 requests/s with a p95 of 46–94 ms when the 50 connections happened to split
  evenly, and 600 requests/s with a p95 of 101 ms in a run where they did not: a keep-alive connection stays with
  the process that accepted it (splits of 48 to 2 and 40 to 10 were counted with `ss`), and one process uses at most
  about one core because of the GIL. Synchronous workers answer one request per connection, so each request goes to
  whichever process is free; the connection set-up this costs is in the server CPU above.
- **Cache miss**: the token, `COUNT(*)` and the page as `.values()` rows, turned into JSON by `ListingOutput`'s own
  fields without a serializer walking model instances (same schema, checked against the serializer by a test).
  Search is a sequential `ILIKE` over names and descriptions and deep offsets read every row before them: those are
  the database time of the misses above. A `pg_trgm` GIN index and keyset pagination are the next steps if unique
  searches or deep paging dominate a real deployment.
- **Connections** are kept 60 s by default (`ONEFOLD_DB_CONN_MAX_AGE`, health-checked); 0 opens one per request.
- `ONEFOLD_SERVER_TIMING=true` adds the `Server-Timing` header read here (off by default).
"""


def print_targets(defaults: dict) -> None:
    """The issue's targets, read off the run with the default settings (the last configuration)."""
    everything = [sample for samples in defaults["timings"].values() for sample in samples]
    median = median_of([sample[0] for sample in everything])
    loaded = defaults["loaded"]
    p95, throughput = loaded["p95"] / 1000, loaded["requests"] / (loaded["microseconds"] / 1e6)
    server_over_wrk = (
        loaded["cpu_server"] / loaded["cpu_wrk"]
    )  # the same requests: per request alike
    print("## Targets (default settings)\n")
    print("| target | measured | |")
    print("|---|---:|---|")
    for name, measured, met in [
        (
            f"median server time of a catalog page ≤ {TARGET_MEDIAN_MS:.0f} ms",
            f"{median:.2f} ms",
            median <= TARGET_MEDIAN_MS,
        ),
        (
            f"p95 < {TARGET_P95_MS:.0f} ms with {CLIENTS} concurrent clients",
            f"{p95:.1f} ms",
            p95 < TARGET_P95_MS,
        ),
        (
            f"≥ {TARGET_THROUGHPUT} requests/s",
            f"{throughput:,.0f} req/s",
            throughput >= TARGET_THROUGHPUT,
        ),
        (
            f"server CPU per request ÷ wrk's CPU per request, {CLIENTS} connections ≤ "
            f"{TARGET_SERVER_OVER_WRK:.0f}× (issue 42)",
            f"{server_over_wrk:.1f}×",
            server_over_wrk <= TARGET_SERVER_OVER_WRK,
        ),
    ]:
        print(f"| {name} | {measured} | {'**met**' if met else '**missed**'} |")
    print(
        f"| (not a target) what two idle cores could serve, from the CPU per request | "
        f"{2000 / cpu_per_request_ms(loaded):,.0f} req/s | estimate |"
    )


if __name__ == "__main__":
    main()
