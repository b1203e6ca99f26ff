"""The embedded default (SQLite, as `make run` serves it) holds a handful of concurrent writers without a 500,
and a write that still finds the database locked is answered 503 with Retry-After."""

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 8
TOKENS_PER_WRITER = 6
SIGN_IN = {"username": "writer", "password": "writer-password"}


def market_environment(folder: Path, **settings: str) -> dict[str, str]:
    """A market's environment on a SQLite file in the folder (with its own var folder and filesystem broker)."""
    environment = {key: value for key, value in os.environ.items() if key != "CELERY_BROKER_URL"}
    environment.update(
        DATABASE_URL=f"sqlite:///{folder / 'market.sqlite3'}",
        ONEFOLD_VAR_DIR=str(folder / "var"),
        ONEFOLD_MEDIA_ROOT=str(folder / "media"),
        ONEFOLD_DEBUG="true",  # as `make run` serves it
        **settings,
    )
    return environment


def manage(environment: dict[str, str], *arguments: str) -> None:
    subprocess.run([sys.executable, "manage.py", *arguments], cwd=ROOT, env=environment, check=True)


@pytest.fixture(scope="module")
def migrated_database(tmp_path_factory) -> Path:
    """A migrated SQLite database with one user, made once and copied for each server."""
    folder = tmp_path_factory.mktemp("sqlite-template")
    environment = market_environment(folder)
    manage(environment, "migrate", "--noinput", "-v", "0")
    manage(
        environment,
        "shell",
        "-c",
        "from market.accounts.services import user_create; "
        "user_create(username='writer', password='writer-password')",
    )
    return folder / "market.sqlite3"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def sqlite_market(migrated_database: Path, folder: Path, **settings: str):
    """A market server (Django's threaded runserver, as `make run` starts it) on a copy of the database; yields
    its address."""
    shutil.copy(migrated_database, folder / "market.sqlite3")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=market_environment(folder, **settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # it answers once it has started, however long a loaded machine takes
            assert server.poll() is None, "the SQLite market server stopped while starting"
            try:
                requests.get(f"{url}/api/me/", timeout=5)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


def concurrent_writes(market: str) -> list[tuple[str, int, str]]:
    """WRITERS clients at once, each signing in, then creating and revoking TOKENS_PER_WRITER tokens; returns
    (what, status, body) of every answer."""
    answers: list[tuple[str, int, str]] = []
    start = threading.Barrier(WRITERS)

    def writer(number: int) -> None:
        session = requests.Session()
        start.wait()
        signed_in = session.post(
            f"{market}/api/auth/token/", json={**SIGN_IN, "name": f"writer {number}"}, timeout=120
        )
        answers.append(("sign-in", signed_in.status_code, signed_in.text))
        if signed_in.status_code != 200:
            return
        session.headers["Authorization"] = f"Token {signed_in.json()['token']}"
        for index in range(TOKENS_PER_WRITER):
            created = session.post(
                f"{market}/api/auth/tokens/",
                json={"name": f"writer {number} token {index}"},
                timeout=120,
            )
            answers.append(("create", created.status_code, created.text))
            if created.status_code == 201:
                revoked = session.post(
                    f"{market}/api/auth/tokens/{created.json()['id']}/revoke/", timeout=120
                )
                answers.append(("revoke", revoked.status_code, revoked.text))

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_concurrent_sign_ins_token_creations_and_revocations_on_sqlite_all_succeed(
    migrated_database, tmp_path
):
    with sqlite_market(migrated_database, tmp_path) as market:
        answers = concurrent_writes(market)
    assert [answer for answer in answers if answer[1] >= 300] == []
    assert sorted(kind for kind, _status, _text in answers) == sorted(
        ["sign-in"] * WRITERS + ["create", "revoke"] * WRITERS * TOKENS_PER_WRITER
    )


def test_a_write_that_still_finds_sqlite_locked_is_answered_503_with_retry_after(
    migrated_database, tmp_path
):
    with sqlite_market(
        migrated_database, tmp_path, ONEFOLD_SQLITE_BUSY_TIMEOUT_SECONDS="1"
    ) as market:
        browser = requests.Session()
        browser.get(f"{market}/sign-in/", timeout=60)  # the form's CSRF cookie
        form = {**SIGN_IN, "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        holder = sqlite3.connect(tmp_path / "market.sqlite3")
        holder.execute(
            "BEGIN EXCLUSIVE"
        )  # another writer holds the lock for longer than the server waits
        try:
            api = requests.post(f"{market}/api/auth/token/", json=SIGN_IN, timeout=60)
            page = browser.post(f"{market}/sign-in/", data=form, timeout=60)
        finally:
            holder.rollback()
            holder.close()
        after = requests.post(f"{market}/api/auth/token/", json=SIGN_IN, timeout=60)
    busy = "The market's database is busy with other requests; try again in a few seconds."
    assert (api.status_code, api.headers["Retry-After"], api.json()) == (503, "2", {"detail": busy})
    assert (page.status_code, page.headers["Retry-After"], page.text) == (503, "2", busy)
    assert after.status_code == 200


def test_the_simulation_makes_its_accounts_again_once_sqlite_stops_being_locked(
    migrated_database, tmp_path
):
    shutil.copy(migrated_database, tmp_path / "market.sqlite3")
    holder = sqlite3.connect(tmp_path / "market.sqlite3")
    holder.execute("BEGIN EXCLUSIVE")  # the running market writing for longer than the busy timeout
    command = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-v",
            "0",
            "-c",
            "from market.federations.management.commands.onefold_simulate import "
            "accounts_ensure_retrying; print(sorted(accounts_ensure_retrying(2)))",
        ],
        cwd=ROOT,
        env=market_environment(tmp_path, ONEFOLD_SQLITE_BUSY_TIMEOUT_SECONDS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first_line = command.stdout.readline()  # written once an attempt found the database locked
    finally:
        holder.rollback()
        holder.close()
    rest, _ = command.communicate(timeout=300)
    assert first_line == "The market's database is busy; making the accounts again in 2 s.\n"
    assert (command.returncode, rest) == (0, "['buyer', 'operator', 'silos']\n")
    usernames = sqlite3.connect(tmp_path / "market.sqlite3").execute(
        "SELECT username FROM accounts_user"
    )
    assert sorted(name for (name,) in usernames) == [
        "buyer",
        "operator",
        "silo-01",
        "silo-02",
        "writer",
    ]
