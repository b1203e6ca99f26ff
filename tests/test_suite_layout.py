"""The suite's own shape (issue 41): fixtures are defined once, in the plugin modules of :mod:`tests.fixtures` listed
in ``tests/conftest.py``, and no file imports a test module, a directory's conftest or a fixture function. An
imported fixture is a second definition of it in the importing module, so a session fixture would be computed again
for that module; a test module imported by another runs its module-level code twice and ties two tests together."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def fixture_names(path: Path) -> set[str]:
    return {
        node.name
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef)
        and any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
    }


def layout_offences(files: dict[str, str], fixtures: dict[str, set[str]]) -> list[str]:
    """``path: what it imports`` for every import of a test module, a conftest other than the root's plain helpers,
    or a fixture of ``fixtures`` (module name → its fixture names)."""
    offences = []
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("tests."):
                continue
            leaf = node.module.rsplit(".", 1)[-1]
            named = {alias.name for alias in node.names}
            if leaf.startswith("test_") or (leaf == "conftest" and node.module != "tests.conftest"):
                offences.append(f"{path}: {node.module}")
            elif imported := sorted(named & (fixtures.get(node.module, set()) | {"*"})):
                offences.append(f"{path}: fixtures {', '.join(imported)} from {node.module}")
    return offences


def test_no_file_imports_a_test_module_a_conftest_or_a_fixture():
    files = {
        str(path.relative_to(TESTS)): path.read_text()
        for path in sorted(TESTS.rglob("*.py"))
        if "vendor" not in path.parts
    }
    fixtures = {
        "tests.conftest": fixture_names(TESTS / "conftest.py"),
        **{
            f"tests.fixtures.{path.stem}": fixture_names(path)
            for path in (TESTS / "fixtures").glob("*.py")
        },
    }
    assert layout_offences(files, fixtures) == []


def test_each_kind_of_offence_is_found():
    files = {
        "a.py": "from tests.market.jobs.test_services import post_job\n",
        "b.py": "from tests.market.jobs.conftest import *\n",
        "c.py": "from tests.fixtures.jobs import FAST_FEDKT, fedkt_submissions\n",
        "d.py": "from tests.fixtures.jobs import FAST_FEDKT\nfrom tests.conftest import api_client_for\n",
    }
    assert layout_offences(files, {"tests.fixtures.jobs": {"fedkt_submissions"}}) == [
        "a.py: tests.market.jobs.test_services",
        "b.py: tests.market.jobs.conftest",
        "c.py: fixtures fedkt_submissions from tests.fixtures.jobs",
    ]
