"""Shared fixtures: people and organisations, a federation with real Adult public data, API clients.

The suite runs against the real PostgreSQL (``make test`` sets DATABASE_URL); artifacts go to a
fresh media folder per test.
"""

import io
import os
from pathlib import Path

import pandas as pd
import pytest

# Playwright's sync API runs an event loop; the ORM refuses to run inside one unless told (tests only).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

DATA_DIR = Path(os.environ.get("ONEFOLD_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
ADULT_LABELS = ["<=50K", ">50K"]


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


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

    return federation_create(name="Adult income", description="Predict whether income exceeds 50K.",
                             class_labels=ADULT_LABELS, label_column="income",
                             allowed_privacy_levels=["L0", "L1", "L2"], default_privacy_level="L1",
                             default_parameters={"gamma": 0.04, "query_fraction": 0.01, "delta": 1e-5},
                             created_by=operator)


@pytest.fixture
def federation_with_data(federation, operator, adult_public_csv, adult_evaluation_csv, silo_user):
    from market.federations.services import evaluation_split_upload, federation_join, public_dataset_upload

    public_dataset_upload(federation=federation, data=adult_public_csv, uploaded_by=operator)
    evaluation_split_upload(federation=federation, data=adult_evaluation_csv, uploaded_by=operator)
    federation_join(federation=federation, user=silo_user)
    return federation


def wait_until(condition, *, timeout: float, interval: float = 0.2, message: str):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(message)


@pytest.fixture
def celery_worker(transactional_db, settings, media_root, tmp_path):
    """A real Celery worker process (solo pool, so its pid is the one that validates) on the real broker."""
    import subprocess
    import sys

    from django.db import connection

    from workers.celery_app import app

    database = connection.settings_dict
    env = {**os.environ, "ONEFOLD_DEBUG": "true", "ONEFOLD_MEDIA_ROOT": str(media_root),
           "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
           "ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS": str(settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS).lower()}
    app.control.purge()
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--pool", "solo",
                                   "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[1])
    try:
        wait_until(lambda: b" ready." in log_path.read_bytes() or worker.poll() is not None, timeout=60,
                   message="the Celery worker did not start")
        assert worker.poll() is None, log_path.read_text()
        worker.log_path = log_path
        yield worker
    finally:
        worker.terminate()
        worker.wait(timeout=30)
