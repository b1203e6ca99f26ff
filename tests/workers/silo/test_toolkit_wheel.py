"""The market builds the toolkit's wheel from the package layout and serves it to anyone at /toolkit/.

The wheel holds the packages and modules at the top of the toolkit's import closure (``workers.silo`` and every
``workers`` module it imports), whole: nothing the toolkit needs is missing, what ships imports only what ships, no
server-side or job-side package rides along, and no module that research alone imports is in it (found from the
imports, so a research helper written in a shipped package is caught the day it lands).
"""

import ast
import hashlib
import io
import tomllib
import zipfile
from pathlib import Path

import pytest

from market.toolkit.wheel import toolkit_wheel, wheel_build

ROOT = Path(__file__).resolve().parents[3]
RESEARCH_AND_SERVER = (
    "workers/reproduce/",
    "workers/jobs/",
    "workers/datasets.py",
    "workers/simulation.py",
    "workers/tasks.py",
    "workers/submission_validation.py",
    "workers/augmentation_training.py",
    "workers/exchange_aggregation.py",
    "workers/celery_app.py",
    "workers/apps.py",
    "benchmarks/",
    "market/",
    "frontend/",
    "tests/",
)


def module_path(name: str) -> str | None:
    path = ROOT / Path(*name.split("."))
    if (path / "__init__.py").is_file():
        return (path / "__init__.py").relative_to(ROOT).as_posix()
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py").relative_to(ROOT).as_posix()
    return None


def workers_imports(path: str) -> set[str]:
    """The ``workers`` modules a file imports, at the top or inside functions (``from a import b``: a and a.b)."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name.split(".")[0] == "workers"}


def import_closure(roots: list[str]) -> set[str]:
    """The files of ``roots`` and of every ``workers`` module they import, transitively, with their packages."""
    files: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        path = module_path(name)
        if path is None or path in files:
            continue
        files.add(path)
        parts = name.split(".")
        pending += [".".join(parts[:end]) for end in range(1, len(parts))]
        pending += sorted(workers_imports(path))
    return files


def modules_under(folder: str) -> list[str]:
    """The dotted names of the Python files under ``folder`` (migrations aside)."""
    return [
        path.relative_to(ROOT)
        .with_suffix("")
        .as_posix()
        .replace("/", ".")
        .removesuffix(".__init__")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def research_only_files() -> set[str]:
    """The ``workers`` files that research imports and nothing that runs the market or a silo does: computed from
    the imports, so a core module that only a reproduction uses is found the day it is written."""
    research = [
        *modules_under("workers/reproduce"),
        "workers.datasets",
        *modules_under("benchmarks"),
    ]
    shipping = [
        *modules_under("market"),
        *modules_under("frontend"),
        *modules_under("workers/silo"),
        *modules_under("workers/runner"),
        "workers.tasks",
        "workers.celery_app",
        "workers.apps",
        "workers.simulation",
        # the child processes the market starts with ``python -m`` (the sandbox's and the warm sessions')
        "workers.modelio.child",
        "workers.modelio.session_child",
    ]
    return import_closure(research) - import_closure(shipping)


@pytest.fixture(scope="module")
def shipped_python_files() -> set[str]:
    with zipfile.ZipFile(io.BytesIO(wheel_build().data)) as archive:
        return {name for name in archive.namelist() if name.endswith(".py")}


def test_the_wheel_holds_the_toolkits_import_closure_and_nothing_research_or_server_only(
    shipped_python_files,
):
    toolkit = [f"workers.silo.{path.stem}" for path in (ROOT / "workers" / "silo").glob("*.py")]
    needed = import_closure(toolkit)
    assert needed <= shipped_python_files, sorted(needed - shipped_python_files)
    assert not [
        name for name in shipped_python_files if name.startswith(RESEARCH_AND_SERVER)
    ] and not [name for name in shipped_python_files if "simulation" in name]
    # what ships imports only what ships: no module of the wheel fails to import for want of another
    assert import_closure(
        [name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in shipped_python_files]
    ) == shipped_python_files  # fmt: skip


def test_the_wheel_names_exactly_the_packages_and_modules_the_toolkit_imports():
    """``only-include`` is a list, but not a free one: it is the top level of the toolkit's import closure, so a
    package the toolkit stops importing leaves the wheel (this fails until it is struck from the list)."""
    toolkit = [f"workers.silo.{path.stem}" for path in (ROOT / "workers" / "silo").glob("*.py")]
    imported = {Path(name).relative_to("workers").parts[0] for name in import_closure(toolkit)}
    build = tomllib.loads((ROOT / "workers" / "pyproject.toml").read_text())["tool"]["hatch"][
        "build"
    ]
    assert sorted(build["targets"]["wheel"]["only-include"]) == sorted(imported)


def test_no_module_in_the_wheel_is_used_by_research_alone(shipped_python_files):
    research_only = research_only_files()
    assert (
        "workers/reproduce/stacked_mlp.py" in research_only
    )  # the check sees a research-only module
    assert not research_only & shipped_python_files, sorted(research_only & shipped_python_files)


def test_the_wheel_is_reproducible_and_declares_the_command_and_both_extras():
    first, second = wheel_build(), wheel_build()
    assert first.data == second.data and first.filename == "onefold_toolkit-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(io.BytesIO(first.data)) as archive:
        metadata = archive.read("onefold_toolkit-0.1.0.dist-info/METADATA").decode()
        entry_points = archive.read("onefold_toolkit-0.1.0.dist-info/entry_points.txt").decode()
    assert "onefold = workers.silo.cli:onefold" in entry_points
    assert 'Requires-Dist: scikit-learn==1.9.1; extra == "train"' in metadata
    assert 'Requires-Dist: torch==2.13.0; extra == "neural"' in metadata
    assert "torch" not in "".join(line for line in metadata.splitlines() if '"train"' in line)


@pytest.mark.django_db
def test_anyone_gets_the_wheel_from_the_address_the_api_gives(client):
    described = client.get("/api/toolkit/")
    assert described.status_code == 200
    answer = described.json()
    assert answer["url"] == f"http://testserver/toolkit/{toolkit_wheel().filename}"
    assert answer["extras"] == ["train", "neural"]
    downloaded = client.get(answer["url"].removeprefix("http://testserver"))
    assert downloaded.status_code == 200 and downloaded["Content-Type"] == "application/zip"
    assert hashlib.sha256(downloaded.content).hexdigest() == answer["sha256"]
    assert client.get("/toolkit/onefold_toolkit-9.9.9-py3-none-any.whl").status_code == 404


def test_the_wheel_ships_the_apache_licence_and_declares_it_in_its_metadata():
    with zipfile.ZipFile(io.BytesIO(wheel_build().data)) as archive:
        metadata = archive.read("onefold_toolkit-0.1.0.dist-info/METADATA").decode().splitlines()
        licence = archive.read("onefold_toolkit-0.1.0.dist-info/licenses/LICENSE")
        record = archive.read("onefold_toolkit-0.1.0.dist-info/RECORD").decode()
    assert metadata[0] == "Metadata-Version: 2.4"
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert licence == (ROOT / "LICENSE").read_bytes()
    assert "onefold_toolkit-0.1.0.dist-info/licenses/LICENSE,sha256=" in record
