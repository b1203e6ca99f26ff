import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from market.settings import artifact_storage, env_bool, env_int

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_read_from_the_environment_is_documented_in_env_example():
    settings, web_server = (
        (ROOT / "market/settings.py").read_text(),
        (ROOT / "docker/gunicorn.conf.py").read_text(),
    )
    read = set(re.findall(r'env_(?:text|bool|int)\(\s*"([A-Z_]+)"', settings))
    read |= set(re.findall(r'os\.environ\.get\(\s*"([A-Z_]+)"', settings + web_server))
    documented = set(
        re.findall(r"^([A-Z_]+)=", (ROOT / "docker/.env.example").read_text(), re.MULTILINE)
    )
    assert read == documented


@pytest.mark.parametrize(
    "reader, value, message",
    [
        (env_int, "lots", "must be a whole number"),
        (env_int, "-3", "must be at least 1"),
        (env_bool, "maybe", "must be true or false"),
    ],
)
def test_bad_setting_values_stop_start_up_with_the_variables_name(
    monkeypatch, reader, value, message
):
    monkeypatch.setenv("ONEFOLD_EXAMPLE", value)
    with pytest.raises(ImproperlyConfigured, match=f"ONEFOLD_EXAMPLE {message}"):
        reader("ONEFOLD_EXAMPLE", 1)


def test_the_artifact_store_is_the_filesystem_or_a_named_s3_bucket(monkeypatch):
    assert artifact_storage("filesystem") == {
        "BACKEND": "django.core.files.storage.FileSystemStorage"
    }
    with pytest.raises(ImproperlyConfigured, match="filesystem or s3, not 'ftp'"):
        artifact_storage("ftp")
    monkeypatch.delenv("ONEFOLD_S3_BUCKET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="needs ONEFOLD_S3_BUCKET"):
        artifact_storage("s3")
    monkeypatch.setenv("ONEFOLD_S3_BUCKET", "onefold-artifacts")
    monkeypatch.setenv("ONEFOLD_S3_ENDPOINT_URL", "https://minio.internal:9000")
    options = artifact_storage("s3")["OPTIONS"]
    assert options["bucket_name"] == "onefold-artifacts"
    assert options["endpoint_url"] == "https://minio.internal:9000"
    # Private, presigned, and never overwriting a stored artifact (a taken name gets a suffix).
    assert options["default_acl"] is None and options["querystring_auth"] is True
    assert options["file_overwrite"] is False


def settings_process(environment: dict, code: str) -> subprocess.CompletedProcess:
    """Python with the market's settings loaded under ``environment`` (on top of this test run's)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'market.settings'; django.setup()\n"
            + code,
        ],
        cwd=ROOT,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_pool_size_gives_each_process_a_psycopg_pool_that_serves_queries():
    from django.conf import settings

    result = settings_process(
        {
            "ONEFOLD_DB_POOL_MAX_SIZE": "3",
            "ONEFOLD_DB_CONN_MAX_AGE": "60",
            # PostgreSQL's maintenance database: it exists wherever the server does, tables or not
            "DATABASE_URL": os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres",
        },
        "from django.conf import settings\n"
        "from django.db import connection\n"
        "print(settings.DATABASES['default']['OPTIONS']['pool'], settings.DATABASES['default']['CONN_MAX_AGE'])\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('SELECT 41 + 1')\n"
        "    print(cursor.fetchone()[0], connection.pool.get_stats()['pool_max'])\n",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "{'min_size': 1, 'max_size': 3, 'timeout': 10} 0",
        "42 3",
    ]
    assert "pool" not in settings.DATABASES["default"].get("OPTIONS", {})  # off by default


def test_a_pool_needs_postgresql():
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-c", "import market.settings"],
        cwd=ROOT,
        env={
            **environment,
            "ONEFOLD_DB_POOL_MAX_SIZE": "3",
            "ONEFOLD_VAR_DIR": "/tmp/onefold-pool-test",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "ONEFOLD_DB_POOL_MAX_SIZE needs PostgreSQL" in result.stderr


def settings_read_with_a_default(source: str) -> list[str]:
    """The ONEFOLD_ settings that ``source`` reads with a default of its own: ``getattr(settings, "ONEFOLD_…", d)``."""
    import ast

    return [
        node.args[1].value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "getattr"
        and len(node.args) == 3
        and isinstance(node.args[1], ast.Constant)
        and str(node.args[1].value).startswith("ONEFOLD_")
    ]


def test_a_setting_read_with_a_default_of_its_own_is_found():
    assert settings_read_with_a_default(
        'lease = getattr(settings, "ONEFOLD_JOB_LEASE_SECONDS", 120)\n'
    ) == ["ONEFOLD_JOB_LEASE_SECONDS"]


def test_runtime_defaults_are_written_once_in_the_settings():
    # market/settings.py writes each default once, from its environment variable; a call site with a default of
    # its own would be a second one that silently disagrees when the first changes. One test lists every offender.
    offenders = {
        str(path.relative_to(ROOT)): names
        for package in ("market", "workers", "frontend")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "market/settings.py"
        and (names := settings_read_with_a_default(path.read_text()))
    }
    assert offenders == {}
