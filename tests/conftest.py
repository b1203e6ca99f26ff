"""Shared fixtures: people and organisations, a federation with real Adult public data, API clients.

The suite runs against the real PostgreSQL (``make test`` sets DATABASE_URL); artifacts go to a
fresh media folder per test.
"""

import io
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workers.data_files import data_dir, data_files_missing
from workers.features import encode_features, encode_labels, infer_feature_spec, read_table

# The shared fixtures, each defined once (tests/fixtures/__init__.py says why no test imports a conftest).
pytest_plugins = [
    "tests.fixtures.browser",
    "tests.fixtures.budgets",
    "tests.fixtures.commerce",
    "tests.fixtures.jobs",
    "tests.fixtures.modelio",
    "tests.fixtures.security",
    "tests.fixtures.silo",
    "tests.fixtures.webhooks",
]

# Playwright's sync API runs an event loop; the ORM refuses to run inside one unless told (tests only).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

DATA_DIR = data_dir()


def pytest_sessionstart(session):
    """Stop at once, saying what to run, when the real data sets are not in place (``make data`` fetches them)."""
    if missing := data_files_missing(DATA_DIR):
        pytest.exit(
            f"{len(missing)} data files are missing or differ from their checksums in {DATA_DIR} "
            f"(first: {missing[0]}): run `make data` first.",
            returncode=4,
        )


ADULT_LABELS = ["<=50K", ">50K"]


@pytest.fixture(autouse=True)
def media_root(request, tmp_path):
    """A fresh media folder per test (pure-core runs with ``-p no:django`` have no settings to change)."""
    if not request.config.pluginmanager.hasplugin("django"):
        return None
    settings = request.getfixturevalue("settings")
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(autouse=True)
def fresh_cache(request):
    """Sign-in counters and API throttles live in the cache; each test starts with none."""
    if request.config.pluginmanager.hasplugin("django"):
        from django.core.cache import cache

        cache.clear()


# Fixtures that break an invariant on purpose (to test that it is detected) name the check they skip.
INVARIANTS_SKIPPED_BY_FIXTURE = {"audit_trigger_disabled": "audit", "invariants_not_checked": "all"}


@pytest.fixture(autouse=True)
def market_invariants(request):
    """After every test that used the database, before its data is rolled back or flushed: wallets equal their
    ledgers and are non-negative, budgets are never overspent, no job runs without a live lease, the audit
    chain verifies (tests/security/invariants.py; checks of models not installed yet are skipped)."""
    uses_database = request.config.pluginmanager.hasplugin("django") and (
        "_django_db_helper" in request.fixturenames or request.node.get_closest_marker("django_db")
    )
    skipped = frozenset(
        check
        for name, check in INVARIANTS_SKIPPED_BY_FIXTURE.items()
        if name in request.fixturenames
    )
    if not uses_database or "all" in skipped:
        yield
        return
    request.getfixturevalue(
        "_django_db_helper"
    )  # so that this check runs before the database is reset
    yield
    from django.db import DatabaseError

    from tests.security.invariants import invariant_violations

    try:
        violations = invariant_violations(skip=skipped)
    except (
        DatabaseError
    ):  # the test left its transaction aborted; it has failed for that reason already
        return
    assert not violations, "Market invariants broken after this test:\n" + "\n".join(violations)


@pytest.fixture
def invariants_not_checked():
    """For a test that deliberately leaves the market inconsistent (to show a check catches it)."""


@pytest.fixture(scope="session")
def adult_frame() -> pd.DataFrame:
    """A fixed 3,000-row sample of the real UCI Adult data, income labels included."""
    frame = pd.read_parquet(DATA_DIR / "adult.parquet")
    return frame.sample(n=3000, random_state=0).reset_index(drop=True)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue().encode()


@pytest.fixture(scope="session")
def adult_public_csv(adult_frame) -> bytes:
    return csv_bytes(adult_frame.iloc[:2000].drop(columns=["income"]))


@pytest.fixture(scope="session")
def adult_evaluation_csv(adult_frame) -> bytes:
    return csv_bytes(adult_frame.iloc[2000:2500])


@pytest.fixture
def operator(db):
    from market.accounts.services import user_create

    return user_create(username="olivia-operator", password="operator-password", is_operator=True)


@pytest.fixture
def silo_user(db):
    from market.accounts.services import organisation_create, user_create

    hospital = organisation_create(name="Northwind Hospital")
    return user_create(username="sam-silo", password="silo-password", organisation=hospital)


@pytest.fixture
def other_silo_user(db):
    from market.accounts.services import organisation_create, user_create

    bank = organisation_create(name="Contoso Bank")
    return user_create(username="bea-bank", password="bank-password", organisation=bank)


def api_client_for(user):
    from rest_framework.test import APIClient

    from market.accounts.services import user_token

    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=user)}")
    return client


@pytest.fixture
def eager_celery(settings):
    """Celery tasks run in this process as they are queued (jobs: chunks of 2 submissions), errors raised."""
    from workers.celery_app import app

    settings.ONEFOLD_JOB_CHUNK_SIZE = 2
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = False, False


@pytest.fixture
def operator_api(operator):
    return api_client_for(operator)


@pytest.fixture
def silo_api(silo_user):
    return api_client_for(silo_user)


@pytest.fixture
def other_silo_api(other_silo_user):
    return api_client_for(other_silo_user)


@pytest.fixture
def federation(operator):
    from market.federations.services import federation_create

    return federation_create(
        name="Adult income",
        description="Predict whether income exceeds 50K.",
        class_labels=ADULT_LABELS,
        label_column="income",
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L1",
        default_parameters={"gamma": 0.04, "query_fraction": 0.01, "delta": 1e-5},
        # Open, so that the tests' silos join by themselves; admission and invitations have their own tests
        # (tests/market/federations/test_membership.py, tests/market/invitations/).
        policies={"membership_policy": "open"},
        created_by=operator,
    )


@pytest.fixture
def federation_with_data(federation, operator, adult_public_csv, adult_evaluation_csv, silo_user):
    from market.federations.membership import federation_join
    from market.federations.services import evaluation_split_upload, public_dataset_upload

    public_dataset_upload(federation=federation, data=adult_public_csv, uploaded_by=operator)
    evaluation_split_upload(federation=federation, data=adult_evaluation_csv, uploaded_by=operator)
    federation_join(federation=federation, user=silo_user)
    return federation


# --- real models trained on the encoded Adult data, exported to every accepted format ---


@pytest.fixture(scope="session")
def adult_training(adult_frame, adult_public_csv):
    """Encoded features and labels of 2,000 Adult rows, with the spec the market infers from the public CSV."""
    spec = infer_feature_spec(read_table(adult_public_csv), label_column="income")
    rows = adult_frame.iloc[:2000]
    return encode_features(rows, spec), encode_labels(rows["income"], ADULT_LABELS)


@pytest.fixture(scope="session")
def adult_models(adult_training):
    """Fitted native models keyed by name: random forest, XGBoost and a zoo MLP."""
    import torch
    from sklearn.ensemble import RandomForestClassifier
    from xgboost import XGBClassifier

    from workers.zoo import build_module

    features, labels = adult_training
    forest = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(
        features, labels
    )
    boosted = XGBClassifier(n_estimators=20, max_depth=4, random_state=0).fit(features, labels)
    spec = {
        "architecture": "mlp",
        "n_features": features.shape[1],
        "hidden_sizes": [16],
        "n_classes": 2,
    }
    torch.manual_seed(0)
    network = build_module(spec)
    optimiser = torch.optim.Adam(network.parameters(), lr=1e-2)
    inputs, targets = torch.from_numpy(features), torch.from_numpy(labels)
    for _ in range(50):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(network(inputs), targets).backward()
        optimiser.step()
    return {"forest": forest, "boosted": boosted, "network": network, "network_spec": spec}


@pytest.fixture(scope="session")
def model_files(adult_models, adult_training) -> dict[str, bytes]:
    """One file per accepted format, named by the format."""
    from workers.modelio.export import (
        export_sklearn_onnx,
        export_torch_safetensors,
        export_xgboost_json,
        export_xgboost_ubjson,
    )

    n_features = adult_training[0].shape[1]
    return {
        "forest.onnx": export_sklearn_onnx(adult_models["forest"], n_features),
        "boosted.json": export_xgboost_json(adult_models["boosted"]),
        "boosted.ubj": export_xgboost_ubjson(adult_models["boosted"]),
        "network.safetensors": export_torch_safetensors(
            adult_models["network"], adult_models["network_spec"]
        ),
    }


def native_probabilities(adult_models, features: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    with torch.no_grad():
        network = torch.softmax(adult_models["network"](torch.from_numpy(features)), dim=1).numpy()
    return {
        "forest.onnx": adult_models["forest"].predict_proba(features),
        "boosted.json": adult_models["boosted"].predict_proba(features),
        "boosted.ubj": adult_models["boosted"].predict_proba(features),
        "network.safetensors": network,
    }


TIME_SCALE_VARIABLE = "ONEFOLD_TEST_TIME_SCALE"


def time_scale() -> float:
    """How many times longer than on a quiet machine a wait may take now: ``ONEFOLD_TEST_TIME_SCALE`` (default 1,
    e.g. 3 on a machine known to be slow) times the 1-minute load average per usable core when it is above 1 (at
    load 16 on 2 cores, 8). Read on every call, so a wait stretches as the machine gets busier."""
    given = os.environ.get(TIME_SCALE_VARIABLE, "1")
    try:
        factor = float(given)
    except ValueError:
        factor = float("nan")
    if not factor >= 1 or factor == float("inf"):
        raise ValueError(f"{TIME_SCALE_VARIABLE} must be a number of at least 1, not {given!r}.")
    load_per_core = os.getloadavg()[0] / len(os.sched_getaffinity(0))
    return factor * max(1.0, load_per_core)


def scaled_timeout(seconds: float) -> float:
    """``seconds`` a wait may take on a quiet machine, times :func:`time_scale` now: every fixed wait of the suite
    (workers, jobs, pages, servers) goes through this or :func:`wait_until`."""
    return seconds * time_scale()


def scaled_milliseconds(milliseconds: int) -> int:
    """:func:`scaled_timeout` for Playwright, whose timeouts are in milliseconds."""
    return round(scaled_timeout(milliseconds / 1000) * 1000)


def wait_until(condition, *, timeout: float, interval: float = 0.2, message: str, progress=None):
    """Poll ``condition`` until it is true; fail only after ``timeout`` quiet-machine seconds, scaled by
    :func:`time_scale` as the load changes, pass without progress. ``progress`` (optional) returns anything
    comparable, e.g. a job's stage or a log's size: each new value restarts the wait."""
    import time

    started, seen = time.monotonic(), progress() if progress else None
    while time.monotonic() - started < scaled_timeout(timeout):
        if condition():
            return
        time.sleep(interval)
        if progress is not None and (now := progress()) != seen:
            started, seen = time.monotonic(), now
    raise AssertionError(
        f"{message} (no progress for {time.monotonic() - started:.0f} s, at time scale {time_scale():.1f})"
    )


# A worker imports Django, torch and the ML stack before it says it is ready: seconds on a quiet machine, a minute
# or more on 2 cores shared with another test process, its worker and a browser (scaled by wait_until).
WORKER_START_SECONDS = 180
#: How long a worker asked to stop may take to exit on a quiet machine before it is killed.
WORKER_STOP_SECONDS = 30


def process_stopped(process) -> None:
    """Terminate a test's server or worker process, waiting a scaled while, and kill it if it has not exited."""
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=scaled_timeout(WORKER_STOP_SECONDS))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def running_celery_worker(env: dict, log_path: Path):
    """A real Celery worker process (solo pool, so its pid is the one that validates), stopped on exit."""
    import subprocess
    import sys

    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.celery_app",
                "worker",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[1],
        )
    try:
        wait_until(
            lambda: b" ready." in log_path.read_bytes() or worker.poll() is not None,
            timeout=WORKER_START_SECONDS,
            message="the Celery worker did not start",
            progress=lambda: log_path.stat().st_size,
        )
        assert worker.poll() is None, log_path.read_text()
        yield worker
    finally:
        process_stopped(worker)


def worker_environment(settings, media_root) -> dict:
    """What a worker on another machine would be given: the same database, broker and artifact store."""
    from django.db import connection

    database = connection.settings_dict
    return {
        **os.environ,
        "ONEFOLD_DEBUG": "true",
        "ONEFOLD_MEDIA_ROOT": str(media_root),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS": str(
            settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS
        ).lower(),
    }


@pytest.fixture
def celery_worker(transactional_db, settings, media_root, tmp_path):
    """A real worker on the real broker (Redis under ``make test``) and the test PostgreSQL database."""
    from workers.celery_app import app

    app.control.purge()
    with running_celery_worker(
        worker_environment(settings, media_root), tmp_path / "worker.log"
    ) as worker:
        yield worker


def run_at_once(function, arguments: list) -> list:
    """Call ``function`` on every argument in its own thread, all released together; results in order.

    Each thread closes its own database connection, so this works in ``transaction=True`` tests.
    """
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    barrier = Barrier(len(arguments))

    def call(argument):
        try:
            barrier.wait()
            return function(argument)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(arguments)) as pool:
        return list(pool.map(call, arguments))
