import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.conftest import scaled_timeout

ROOT = Path(__file__).resolve().parents[2]


def production_environment(tmp_path, **overrides) -> dict:
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ONEFOLD_")
        and name not in {"DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    return {
        **environment,
        "DJANGO_SETTINGS_MODULE": "market.settings",
        "ONEFOLD_DEBUG": "false",
        "ONEFOLD_SECRET_KEY": secrets.token_urlsafe(50),
        "ONEFOLD_ALLOWED_HOSTS": "onefold.example.org",
        "ONEFOLD_VAR_DIR": str(tmp_path),
        **overrides,
    }


def manage(environment, *arguments):
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(300),
    )


def test_the_deploy_check_passes_at_warning_level_with_production_settings(tmp_path):
    result = manage(
        production_environment(tmp_path), "check", "--deploy", "--fail-level", "WARNING"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deploy_check_fails_when_https_is_switched_off(tmp_path):
    environment = production_environment(
        tmp_path, ONEFOLD_SECURE_SSL_REDIRECT="false", ONEFOLD_SECURE_COOKIES="false"
    )
    result = manage(environment, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 1
    assert all(
        check in result.stderr for check in ("security.W008", "security.W012", "security.W016")
    )


def test_production_refuses_to_start_without_a_strong_secret_key(tmp_path):
    for weak in ("", "change-me"):
        result = manage(production_environment(tmp_path, ONEFOLD_SECRET_KEY=weak), "check")
        assert result.returncode == 1
        assert "ONEFOLD_SECRET_KEY must" in result.stderr


def test_a_malformed_api_rate_stops_start_up(tmp_path):
    result = manage(production_environment(tmp_path, ONEFOLD_API_RATE_PER_TOKEN="lots"), "check")
    assert result.returncode == 1
    assert "The token API rate must look like 600/minute, not 'lots'." in result.stderr
