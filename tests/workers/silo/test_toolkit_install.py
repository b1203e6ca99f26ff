"""The toolkit installs and runs on a silo's machine without the market's server dependencies."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SERVER_PACKAGES = ("django", "rest_framework", "drf_spectacular", "celery", "kombu", "psycopg", "redis", "market",
                   "frontend", "dj_database_url", "gunicorn", "whitenoise")


def pinned(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-\[\],]+)==(\S+)$", line.strip())
        if match:
            pins[match.group(1).split("[")[0].lower()] = match.group(2)
    return pins


def test_the_toolkit_requirements_pin_the_servers_versions_and_no_server_package():
    toolkit, server = pinned(ROOT / "requirements-silo.txt"), pinned(ROOT / "requirements.txt")
    assert {name: server.get(name) for name in toolkit} == toolkit
    assert not {"django", "djangorestframework", "celery", "kombu", "psycopg", "redis"} & set(toolkit)


def test_training_from_the_command_line_loads_no_server_module(pulled, silo_csv, tmp_path):
    script = (
        "import sys\n"
        "from workers.silo.cli import main\n"
        f"code = main(['train', 'adult-income', '--data', {str(silo_csv)!r}, '--pulled', {str(pulled)!r},"
        " '--teacher-param', 'max_depth=3', '--student-param', 'n_estimators=5', '--json'])\n"
        "import workers.silo.client, workers.silo.commands\n"
        f"loaded = sorted(name for name in sys.modules if name.split('.')[0] in {SERVER_PACKAGES!r})\n"
        "print('SERVER MODULES', loaded)\n"
        "sys.exit(code)\n")
    environment = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    finished = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**environment, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert "SERVER MODULES []" in finished.stdout


def test_the_module_entry_point_exits_non_zero_with_a_sentence():
    finished = subprocess.run([sys.executable, "-m", "workers.silo", "whoami"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120,
                              env={**os.environ, "ONEFOLD_CONFIG": "/nonexistent/onefold/config.json"})
    assert finished.returncode == 4
    assert finished.stderr == ("Error: You are not logged in (no /nonexistent/onefold/config.json); run "
                               "`python -m workers.silo login --market URL --username NAME` first.\n")
