"""The federation page's toolkit commands, run exactly as shown, install the market's own wheel into a fresh
virtualenv and pull, train and upload: a real live server, a real worker validating the upload.

What is shown is run as shown, line by line with bash, in an empty folder holding the silo's ``my-table.csv``.
The test chooses only the environment, as a silo's machine would have it: ``ONEFOLD_PASSWORD`` answers ``login``'s
password prompt, ``ONEFOLD_CONFIG`` keeps the login in the test's folder, and pip runs with ``--no-index``
(``PIP_NO_INDEX``) on a fresh virtualenv that also sees the project's site-packages (a ``.pth`` file written
after ``python3 -m venv``): the ``[train]`` extra's libraries, pinned as the server's, count as installed, so pip
fetches the toolkit's wheel from the live server alone and the test takes seconds, not a 500 MB download, and
works where PyPI is unreachable. ``tests/workers/silo/test_toolkit_install.py`` installs from a package index
instead; the test checks that ``onefold`` runs the wheel's code, not the checkout's.
"""

import html
import io
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from tests.conftest import scaled_timeout

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def shown_commands(page: str) -> list[str]:
    block = re.search(r'<pre[^>]*id="toolkit-commands"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert block, "the federation page shows no toolkit commands"
    return html.unescape(block.group(1)).splitlines()


def test_the_federation_pages_commands_install_the_markets_wheel_pull_train_and_upload(
    client, live_server, celery_worker, federation_with_data, silo_user, silo_csv, tmp_path
):
    from market.submissions.models import Submission

    host = live_server.url.removeprefix("http://")
    client.force_login(silo_user)
    page = client.get("/federations/adult-income/", HTTP_HOST=host)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-copy="toolkit-commands"' in text and "frontend/copy.js" in text
    commands = shown_commands(text)
    assert f"onefold-venv/bin/pip install 'onefold-toolkit[train] @ {live_server.url}/toolkit/" in (
        "\n".join(commands)
    )

    home = tmp_path / "silo-machine"
    home.mkdir()
    (home / "my-table.csv").write_bytes(silo_csv.read_bytes())
    environment = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "ONEFOLD_PASSWORD": "silo-password",
        "ONEFOLD_CONFIG": str(home / "onefold.json"),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    project_site_packages = sysconfig.get_paths()["purelib"]
    for line in commands:
        if not line.strip() or line.startswith("#"):
            continue
        finished = subprocess.run(
            ["bash", "-c", line],
            cwd=home,
            env=environment,
            capture_output=True,
            text=True,
            timeout=scaled_timeout(600),
        )
        assert finished.returncode == 0, (line, finished.stdout, finished.stderr)
        if line.startswith("python3 -m venv"):
            (
                next((home / "onefold-venv").glob("lib/python*/site-packages")) / "deps.pth"
            ).write_text(project_site_packages + "\n")
        last = finished.stdout

    assert "status valid: the market accepted it" in last
    submission = Submission.objects.get()
    assert (submission.status, submission.organisation, submission.privacy_level) == (
        "valid",
        silo_user.organisation,
        "L1",  # the federation's default level, as the page's upload form preselects it
    )
    used = subprocess.run(
        ["onefold-venv/bin/python", "-c", "import workers.silo; print(workers.silo.__file__)"],
        cwd=home,
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(60),
    )
    assert used.stdout.startswith(str(home / "onefold-venv" / "lib")), used

    # the page's zip is the folder `onefold pull` wrote, file for file
    pulled = client.get("/api/federations/adult-income/public-dataset/pulled.zip", HTTP_HOST=host)
    assert pulled["Content-Disposition"] == 'attachment; filename="onefold-adult-income.zip"'
    with zipfile.ZipFile(io.BytesIO(pulled.content)) as archive:
        zipped = {name: archive.read(name) for name in archive.namelist()}
    on_disk = {
        f"onefold-adult-income/{path.name}": path.read_bytes()
        for path in (home / "onefold-adult-income").iterdir()
        if path.is_file()
    }
    assert zipped == on_disk
    assert sorted(zipped) == [
        "onefold-adult-income/feature-spec.json",
        "onefold-adult-income/features.npz",
        "onefold-adult-income/federation.json",
    ]
