"""The toolkit installs and runs on a silo's machine without the market's server dependencies."""

import io
import json
import os
import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import scaled_timeout
from tests.fixtures.silo import ScriptedMarket

ROOT = Path(__file__).resolve().parents[3]
TOOLKIT_PROJECT = ROOT / "workers" / "pyproject.toml"
LOCAL_PACKAGE_INDEX = Path(
    "/opt/pypi/simple"
)  # this machine kind's offline mirror; elsewhere pip's own configuration
SERVER_PACKAGES = (
    "django",
    "rest_framework",
    "drf_spectacular",
    "celery",
    "kombu",
    "psycopg",
    "redis",
    "market",
    "frontend",
    "dj_database_url",
    "gunicorn",
    "whitenoise",
)


def pinned(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-\[\],]+)==(\S+)$", line.strip())
        if match:
            pins[match.group(1).split("[")[0].lower()] = match.group(2)
    return pins


def requirement_pins(lines: list[str]) -> dict[str, str]:
    return {
        name.split("[")[0].lower(): version
        for name, _, version in (line.partition("==") for line in lines)
    }


def test_the_toolkit_needs_only_requests_and_its_training_extras_pin_the_servers_versions():
    project = tomllib.loads(TOOLKIT_PROJECT.read_text())["project"]
    training, server = (
        requirement_pins(project["optional-dependencies"]["train"]),
        pinned(ROOT / "requirements.txt"),
    )
    assert [re.split(r"[<>=]", requirement)[0] for requirement in project["dependencies"]] == [
        "requests"
    ]
    assert {name: server.get(name) for name in training} == training
    assert not {"django", "djangorestframework", "celery", "kombu", "psycopg", "redis"} & set(
        training
    )
    assert project["scripts"] == {"onefold": "workers.silo.cli:onefold"}


@pytest.fixture(scope="module")
def installed_toolkit(tmp_path_factory):
    """A fresh virtualenv with ``pip install ./workers`` (requests only), from the local package mirror."""
    environment_folder = tmp_path_factory.mktemp("toolkit") / "venv"
    venv.create(environment_folder, with_pip=True)
    pip_environment = {
        key: value for key, value in os.environ.items() if not key.startswith("PYTHON")
    }
    if LOCAL_PACKAGE_INDEX.is_dir():
        pip_environment["PIP_INDEX_URL"] = LOCAL_PACKAGE_INDEX.as_uri()
    finished = subprocess.run(
        [str(environment_folder / "bin" / "pip"), "install", "--quiet", str(ROOT / "workers")],
        env=pip_environment,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(600),
    )
    assert finished.returncode == 0, finished.stderr
    return environment_folder


def run_installed(
    environment_folder: Path, *arguments: str, config: Path
) -> subprocess.CompletedProcess:
    """Run the installed ``onefold`` outside the checkout, so that nothing of the repository can be imported."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "DJANGO", "ONEFOLD"))
    }
    return subprocess.run(
        [str(environment_folder / "bin" / "onefold"), *arguments],
        cwd=config.parent,
        env={**environment, "ONEFOLD_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=scaled_timeout(120),
    )


def test_the_installed_package_holds_no_server_package_and_no_code_that_imports_one(
    installed_toolkit,
):
    site_packages = next(installed_toolkit.glob("lib/python*/site-packages"))
    distributions = {path.name.split("-")[0].lower() for path in site_packages.glob("*.dist-info")}
    assert distributions == {
        "certifi",
        "charset_normalizer",
        "idna",
        "onefold_toolkit",
        "pip",
        "requests",
        "setuptools",
        "urllib3",
    } - ({"setuptools"} - distributions)
    shipped = sorted(
        path.relative_to(site_packages).as_posix()
        for path in (site_packages / "workers").rglob("*.py")
    )
    assert "workers/silo/cli.py" in shipped and "workers/algorithms/fedkt.py" in shipped
    # `pip install ./workers` (hatchling) installs the files of the wheel the market builds and serves
    from market.toolkit.wheel import wheel_build

    with zipfile.ZipFile(io.BytesIO(wheel_build().data)) as archive:
        assert shipped == sorted(name for name in archive.namelist() if name.endswith(".py"))
    assert not [
        name
        for name in shipped
        if name.startswith("workers/reproduce/")
        or name.endswith("simulation.py")
        or name in ("workers/tasks.py", "workers/celery_app.py", "workers/apps.py")
    ]
    server_import = re.compile(
        rf"^\s*(from|import)\s+({'|'.join(SERVER_PACKAGES)})\b", re.MULTILINE
    )
    assert [
        name for name in shipped if server_import.search((site_packages / name).read_text())
    ] == []


def test_pip_install_of_the_toolkit_ships_the_apache_licence_as_the_markets_wheel_does(
    installed_toolkit,
):
    site_packages = next(installed_toolkit.glob("lib/python*/site-packages"))
    dist_info = next(site_packages.glob("onefold_toolkit-*.dist-info"))
    metadata = (dist_info / "METADATA").read_text().splitlines()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert (dist_info / "licenses" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()


def test_the_installed_onefold_command_logs_in_and_asks_for_the_training_extras(
    installed_toolkit, tmp_path
):
    config = tmp_path / "onefold.json"
    helped = run_installed(installed_toolkit, "--help", config=config)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: onefold ")
    market = ScriptedMarket(
        [
            (200, {"token": "t0k3n"}),
            (
                200,
                {
                    "username": "silo-01",
                    "is_operator": False,
                    "organisation": {
                        "id": 1,
                        "name": "Silo 01",
                        "is_silo": True,
                        "is_buyer": False,
                    },
                },
            ),
        ]
    )
    try:
        logged_in = run_installed(
            installed_toolkit,
            "login",
            "--market",
            market.url,
            "--username",
            "silo-01",
            "--password",
            "secret",
            "--json",
            config=config,
        )
    finally:
        market.close()
    assert logged_in.returncode == 0, logged_in.stderr
    assert json.loads(logged_in.stdout)["organisation"] == "Silo 01"
    assert [(request["method"], request["path"]) for request in market.received] == [
        ("POST", "/api/auth/token/"),
        ("GET", "/api/me/"),
    ]
    assert json.loads(config.read_text()) == {
        "market_url": market.url,
        "token": "t0k3n",
        "username": "silo-01",
    }
    training = run_installed(
        installed_toolkit, "train", "adult-income", "--data", "silo.csv", config=config
    )
    assert training.returncode == 1
    assert training.stderr == (
        "Error: `train` needs the toolkit's [train] extra (numpy is not installed); install it "
        "with: pip install 'onefold-toolkit[train]' (or the wheel address your market's federation "
        "page shows, followed by [train]).\n"
    )


def test_training_from_the_command_line_loads_no_server_module(pulled, silo_csv, tmp_path):
    script = (
        "import sys\n"
        "from workers.silo.cli import main\n"
        f"code = main(['train', 'adult-income', '--data', {str(silo_csv)!r}, '--pulled', {str(pulled)!r},"
        " '--teacher-param', 'max_depth=3', '--student-param', 'n_estimators=5', '--json'])\n"
        "import workers.silo.client, workers.silo.commands\n"
        f"loaded = sorted(name for name in sys.modules if name.split('.')[0] in {SERVER_PACKAGES!r})\n"
        "print('SERVER MODULES', loaded)\n"
        "sys.exit(code)\n"
    )
    environment = {
        key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"
    }
    finished = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**environment, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=scaled_timeout(300),
    )
    assert finished.returncode == 0, finished.stderr
    assert "SERVER MODULES []" in finished.stdout


def test_the_module_entry_point_exits_non_zero_with_a_sentence():
    finished = subprocess.run(
        [sys.executable, "-m", "workers.silo", "whoami"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(120),
        env={**os.environ, "ONEFOLD_CONFIG": "/nonexistent/onefold/config.json"},
    )
    assert finished.returncode == 4
    assert finished.stderr == (
        "Error: You are not logged in (no /nonexistent/onefold/config.json); run "
        "`python -m workers.silo login --market URL --username NAME` first.\n"
    )
