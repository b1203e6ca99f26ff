"""The logic of the CI's bandit and pip-audit checks, on made-up reports (the real runs are `make check`)."""

import datetime
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pip_audit_check = load("pip_audit_check")
bandit_check = load("bandit_check")
import_cycles = load("import_cycles")
TODAY = datetime.date(2026, 11, 23)


def exceptions_file(tmp_path, text: str) -> Path:
    path = tmp_path / "pip-audit-exceptions.txt"
    path.write_text(text)
    return path


def test_a_vulnerability_fails_unless_excused_by_id_and_package(tmp_path):
    report = {
        "dependencies": [
            {
                "name": "Django",
                "version": "5.2.19",
                "vulns": [
                    {"id": "PYSEC-2026-1", "aliases": ["CVE-2026-9"], "fix_versions": ["5.2.20"]}
                ],
            }
        ]
    }
    assert pip_audit_check.verdict(report, {}, set(), set()) == (
        ["django==5.2.19: PYSEC-2026-1 (fixed in: 5.2.20)"],
        [],
        1,
    )
    assert pip_audit_check.verdict(report, {}, {("CVE-2026-9", "django")}, set()) == ([], [], 1)
    assert pip_audit_check.verdict(report, {}, {("CVE-2026-9", "numpy")}, set())[0] != []


def test_a_pin_the_service_does_not_know_fails_unless_listed(tmp_path):
    report = {"dependencies": [{"name": "torch", "skip_reason": "Dependency not found on PyPI"}]}
    pins = {"torch": "2.13.0"}
    assert pip_audit_check.verdict(report, pins, set(), set()) == (
        [],
        ["torch==2.13.0: Dependency not found on PyPI"],
        0,
    )
    assert pip_audit_check.verdict(report, pins, set(), {"torch==2.13.0"}) == ([], [], 0)


def test_exceptions_need_a_date_and_a_reason_and_expire(tmp_path):
    path = exceptions_file(
        tmp_path,
        "# comment\n"
        "vulnerability GHSA-1 django until=2026-12-01 -- no fix released yet\n"
        "unaudited torch==2.13.0 until=2026-11-01 -- old\n"
        "unaudited numpy==2.4.6\n",
    )
    vulnerabilities, unaudited, problems = pip_audit_check.read_exceptions(path, TODAY)
    assert (vulnerabilities, unaudited) == ({("GHSA-1", "django")}, set())
    assert problems == [
        "pip-audit-exceptions.txt:3: the exception for torch==2.13.0 expired on 2026-11-01; review it again",
        "pip-audit-exceptions.txt:4: not 'vulnerability <ID> <package> until=<date> -- <reason>' or "
        "'unaudited <package>==<version> until=<date> -- <reason>'",
    ]


def test_the_committed_exceptions_file_is_well_formed():
    _, _, problems = pip_audit_check.read_exceptions(
        ROOT / ".ci" / "pip-audit-exceptions.txt", TODAY
    )
    assert problems == []


def test_bandit_findings_match_reviews_by_file_glob_and_test_id():
    reviewed = {("workers/reproduce/*.py", "B615"), ("market/settings.py", "B105")}
    findings = [
        {"filename": "workers/reproduce/guha.py", "test_id": "B615"},
        {"filename": "market/settings.py", "test_id": "B105"},
        {"filename": "market/settings.py", "test_id": "B608"},
        {"filename": "market/jobs/services.py", "test_id": "B615"},
    ]
    assert bandit_check.unreviewed(findings, dict.fromkeys(reviewed, "")) == findings[2:]


def test_the_reviewed_bandit_list_gives_every_entry_a_reason_and_date():
    import tomllib

    entries = tomllib.loads((ROOT / ".ci" / "bandit-reviewed.toml").read_text())["finding"]
    assert entries and all(
        entry["reason"].strip() and datetime.date.fromisoformat(entry["reviewed"])
        for entry in entries
    )


def test_the_lock_file_pins_every_requirement_at_its_own_version():
    locked = {}
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines():
        name, separator, version = line.partition("==")
        if separator and not line.startswith((" ", "#")):
            locked[name.lower().replace("_", "-")] = version.split("+")[
                0
            ]  # torch==2.13.0+cpu: the local CPU build
    pins = pip_audit_check.pinned_versions()
    assert {name: locked.get(name) for name in pins} == pins, (
        "run `make lock` after changing a requirements file"
    )


class MadeUpGraph:
    def __init__(self, imports: dict[str, set[str]]):
        self.imports = imports
        self.modules = set(imports)

    def find_modules_directly_imported_by(self, module: str) -> set[str]:
        return self.imports[module] | {"django.db"}  # an outside module is never part of a cycle


def test_import_cycles_are_the_strongly_connected_groups_of_modules():
    graph = MadeUpGraph(
        {
            "market.a": {"workers.b"},
            "workers.b": {"market.c"},
            "market.c": {"market.a", "workers.d"},
            "workers.d": set(),
            "workers.e": {"workers.f"},
            "workers.f": {"workers.e"},
            "frontend.g": {"market.a"},
        }
    )
    assert import_cycles.import_cycles(graph) == [
        ["market.a", "market.c", "workers.b"],
        ["workers.e", "workers.f"],
    ]
    assert (
        import_cycles.import_cycles(MadeUpGraph({"market.a": {"workers.b"}, "workers.b": set()}))
        == []
    )
