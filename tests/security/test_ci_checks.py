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


def audit_outcome(report: dict, pins: dict, excused_unaudited: set) -> tuple[int, list, list]:
    vulnerable, not_audited, audited = pip_audit_check.verdict(
        report, pins, set(), excused_unaudited
    )
    return pip_audit_check.outcome(
        vulnerable=vulnerable,
        not_audited=not_audited,
        audited=audited,
        problems=[],
        pins=pins,
        report=report,
        excused_unaudited=excused_unaudited,
    )


NOT_FOUND = "Dependency not found on PyPI and could not be audited"
PINS = {"django": "5.2.19", "torch": "2.13.0"}
NOTHING_FOUND = {
    "dependencies": [
        {"name": name, "skip_reason": f"{NOT_FOUND}: {name} ({version})"}
        for name, version in PINS.items()
    ]
}


def test_a_run_that_audits_nothing_fails_even_with_every_pin_excused():
    status, out, error = audit_outcome(NOTHING_FOUND, PINS, {"django==5.2.19", "torch==2.13.0"})
    assert (status, out) == (
        1,
        [
            "audited nothing: pip-audit checked none of the 2 pinned packages against a vulnerability "
            "database"
        ],
    )
    assert "a run that audits nothing cannot pass" in error[0]


def test_an_acknowledged_run_that_audits_nothing_says_so_and_never_claims_a_pass():
    status, out, error = audit_outcome(
        NOTHING_FOUND, PINS, {"django==5.2.19", "torch==2.13.0", "*"}
    )
    banner = (
        "pip-audit AUDITED NOTHING: 0 of 2 pinned packages were checked against a vulnerability database "
        f"({NOT_FOUND}), so this check could not have found a vulnerability. It is not a pass: "
        ".ci/pip-audit-exceptions.txt acknowledges that the audit is unavailable ('unaudited *') until its "
        "date; audit the pins where PyPI's per-version JSON or OSV is reachable."
    )
    assert (status, out, error) == (0, [banner], [banner])
    assert not any("no known vulnerability" in line for line in out + error)


def test_a_pass_names_how_many_pins_were_audited_and_a_package_left_out_of_the_report_fails():
    partly = {
        "dependencies": [
            {"name": "Django", "version": "5.2.19", "vulns": []},
            NOTHING_FOUND["dependencies"][1],
        ]
    }
    assert audit_outcome(partly, PINS, {"torch==2.13.0"}) == (
        0,
        [
            "pip-audit: 1 of 2 pinned package(s) audited, no known vulnerability; 1 NOT audited (excused "
            "in .ci/pip-audit-exceptions.txt until their dates): torch==2.13.0."
        ],
        [],
    )
    status, out, _ = audit_outcome({"dependencies": partly["dependencies"][:1]}, PINS, set())
    assert (status, out) == (
        1,
        ["not audited: torch==2.13.0: missing from pip-audit's report"],
    )


def test_the_committed_exceptions_acknowledge_that_this_network_audits_nothing():
    _, unaudited, _ = pip_audit_check.read_exceptions(
        ROOT / ".ci" / "pip-audit-exceptions.txt", TODAY
    )
    assert pip_audit_check.EVERY_PIN in unaudited


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


def test_a_skipped_pin_that_is_the_latest_release_is_audited_from_pypis_project_json():
    skipped = "Dependency not found on PyPI and could not be audited"
    report = {
        "dependencies": [
            {"name": "celery", "skip_reason": f"{skipped}: celery (5.7.0)"},
            {"name": "django", "skip_reason": f"{skipped}: django (5.2.19)"},
        ]
    }
    projects = {
        "celery": {
            "info": {"version": "5.7.0"},
            "vulnerabilities": [
                {"id": "GHSA-1", "aliases": ["CVE-2026-1"], "fixed_in": ["5.7.1"]},
                {"id": "GHSA-2", "aliases": [], "fixed_in": [], "withdrawn": "2026-11-01"},
            ],
        },
        "django": {"info": {"version": "6.1.3"}, "vulnerabilities": []},  # pinned older: unknown
    }
    pins = {"celery": "5.7.0", "django": "5.2.19"}
    audited = pip_audit_check.audit_latest_releases(report, pins, fetch=projects.get)
    assert pip_audit_check.verdict(audited, pins, set(), {"django==5.2.19"}) == (
        ["celery==5.7.0: GHSA-1 (fixed in: 5.7.1)"],
        [],
        1,
    )
    assert pip_audit_check.verdict(audited, pins, {("CVE-2026-1", "celery")}, set()) == (
        [],
        [f"django==5.2.19: {skipped}: django (5.2.19)"],
        1,
    )
    unreachable = pip_audit_check.audit_latest_releases(report, pins, fetch=lambda name: None)
    assert unreachable == report
