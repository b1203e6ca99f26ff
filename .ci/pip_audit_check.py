#!/usr/bin/env python3
"""Audit the pinned requirements with pip-audit (PyPI's vulnerability data) and fail on anything not excused.

Fails when:
- a pinned version has a known vulnerability, unless ``.ci/pip-audit-exceptions.txt`` excuses that
  vulnerability id for that package until a date that has not passed;
- the vulnerability service cannot be reached (the audit did not happen: this is never a pass);
- a pinned version is unknown to the service (it could not be audited), unless the exceptions file
  lists that exact pin as ``unaudited`` until a date that has not passed;
- pip-audit's report leaves out a pinned package (it read fewer packages than the requirements pin).

Where pip-audit could not audit a pin (see below), the pin is audited from PyPI's project JSON
(``https://pypi.org/pypi/<name>/json``, which this network serves) when the pin *is* the project's latest release:
that document lists the latest release's known vulnerabilities (id, aliases, fixed-in versions), the same data
pip-audit's PyPI service reads per version (:func:`audit_latest_releases`). A pin older than the latest release
cannot be audited that way (the document says nothing about older releases) and stays "not audited".

A run that audited no package at all is never reported as a pass: it fails, or, acknowledged by ``unaudited *``,
says in capitals on stdout and stderr that nothing was audited and why, so that nobody reads it as "no known
vulnerability". On this project's network that is every run: pip-audit's ``--index-url`` only steers pip's
dependency resolution (here the mirror is a PEP 503 simple index of files, with no vulnerability data), its PyPI
service asks ``https://pypi.org/pypi/<name>/<version>/json``, which the network answers 404 for every version, and
its OSV service (``--osv-url``) needs an OSV API server, none of which is reachable; no offline vulnerability
database is installed.

Exceptions file lines: ``vulnerability <ID> <package> until=<YYYY-MM-DD> -- <reason>`` or
``unaudited <package>==<version> until=<YYYY-MM-DD> -- <reason>``; ``#`` starts a comment. A run that audited
no package at all fails too, unless a line ``unaudited * until=<YYYY-MM-DD> -- <reason>`` acknowledges that the
whole audit is unavailable (excusing every pin one by one is not enough).
"""

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ["requirements.txt", "requirements-dev.txt"]
EVERY_PIN = "*"  # an ``unaudited`` line for it acknowledges a run that audits nothing
LINE = re.compile(
    r"^(vulnerability|unaudited)\s+(\S+)(?:\s+(\S+))?\s+until=(\d{4}-\d{2}-\d{2})\s+--\s+(.+)$"
)


def read_exceptions(path: Path, today: datetime.date) -> tuple[set, set, list[str]]:
    """(excused (id, package) pairs, excused unaudited pins, problems with the file itself)."""
    vulnerabilities, unaudited, problems = set(), set(), []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = LINE.match(line)
        if not match:
            problems.append(
                f"{path.name}:{number}: not 'vulnerability <ID> <package> until=<date> -- <reason>' "
                "or 'unaudited <package>==<version> until=<date> -- <reason>'"
            )
            continue
        kind, first, second, until, _reason = match.groups()
        if datetime.date.fromisoformat(until) < today:
            problems.append(
                f"{path.name}:{number}: the exception for {first} expired on {until}; review it again"
            )
            continue
        if kind == "vulnerability":
            vulnerabilities.add((first, (second or "").lower()))
        else:
            unaudited.add(first.lower())
    return vulnerabilities, unaudited, problems


def pinned_versions() -> dict[str, str]:
    pins = {}
    for name in REQUIREMENTS:
        for line in (ROOT / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+)", line.strip())
            if match:
                pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def run_pip_audit() -> dict:
    arguments = [
        sys.executable,
        "-m",
        "pip_audit",
        "--no-deps",
        "--disable-pip",
        "--progress-spinner",
        "off",
        "-f",
        "json",
    ]
    for name in REQUIREMENTS:
        arguments += ["-r", name]
    result = subprocess.run(arguments, cwd=ROOT, capture_output=True, text=True, timeout=600)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        sys.exit(
            "pip-audit could not reach its vulnerability service (PyPI's JSON API), so the requirements were "
            f"NOT audited. Check the network and run `make check` again. pip-audit said: {last}"
        )


def project_json(name: str) -> dict | None:
    """PyPI's project JSON for ``name``, None when it cannot be fetched."""
    import requests

    try:
        response = requests.get(f"https://pypi.org/pypi/{name}/json", timeout=30)
        return response.json() if response.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def audit_latest_releases(report: dict, pins: dict, fetch=project_json) -> dict:
    """pip-audit's report with every skipped pin that is its project's latest release audited from PyPI's project
    JSON (its ``vulnerabilities``, withdrawn ones left out); other skipped pins stay skipped. pip-audit's skipped
    entries carry no version: the pin's comes from ``pins``."""
    dependencies = []
    for dependency in report["dependencies"]:
        version = dependency.get("version") or pins.get(
            dependency["name"].lower().replace("_", "-")
        )
        project = fetch(dependency["name"]) if "skip_reason" in dependency else None
        if project is None or project["info"]["version"] != version:
            dependencies.append(dependency)
            continue
        dependencies.append(
            {
                "name": dependency["name"],
                "version": version,
                "vulns": [
                    {
                        "id": vulnerability["id"],
                        "aliases": vulnerability.get("aliases") or [],
                        "fix_versions": vulnerability.get("fixed_in") or [],
                    }
                    for vulnerability in project.get("vulnerabilities") or []
                    if not vulnerability.get("withdrawn")
                ],
            }
        )
    return {**report, "dependencies": dependencies}


def verdict(
    report: dict, pins: dict, excused_vulnerabilities: set, excused_unaudited: set
) -> tuple[list, list, int]:
    """(unexcused vulnerabilities, unexcused unaudited pins, number audited)."""
    vulnerable, not_audited, audited = [], [], 0
    for dependency in report["dependencies"]:
        name = dependency["name"].lower().replace("_", "-")
        pin = f"{name}=={dependency.get('version') or pins.get(name, '?')}"
        if "skip_reason" in dependency:
            if pin not in excused_unaudited:
                not_audited.append(f"{pin}: {dependency['skip_reason']}")
            continue
        audited += 1
        for vulnerability in dependency.get("vulns", []):
            ids = {vulnerability["id"], *vulnerability.get("aliases", [])}
            if not any((identifier, name) in excused_vulnerabilities for identifier in ids):
                fixes = ", ".join(vulnerability.get("fix_versions", [])) or "none yet"
                vulnerable.append(f"{pin}: {vulnerability['id']} (fixed in: {fixes})")
    return vulnerable, not_audited, audited


def outcome(
    *,
    vulnerable: list,
    not_audited: list,
    audited: int,
    problems: list,
    pins: dict,
    report: dict,
    excused_unaudited: set,
) -> tuple[int, list[str], list[str]]:
    """(exit status, lines for stdout, lines for stderr) of a run: failures first, then an audit that audited nothing
    said in so many words, then the pass, which names how many pins were audited and how many were not."""
    reported = {
        dependency["name"].lower().replace("_", "-") for dependency in report["dependencies"]
    }
    left_out = sorted(set(pins) - reported)
    failures = (
        problems
        + [f"vulnerable: {item}" for item in vulnerable]
        + [f"not audited: {item}" for item in not_audited]
        + [
            f"not audited: {name}=={pins[name]}: missing from pip-audit's report"
            for name in left_out
        ]
    )
    if failures:
        return (
            1,
            failures,
            [
                "pip-audit check failed: upgrade the pin, or add a dated, justified line to "
                ".ci/pip-audit-exceptions.txt."
            ],
        )
    if audited == 0 and EVERY_PIN not in excused_unaudited:
        return (
            1,
            [
                f"audited nothing: pip-audit checked none of the {len(pins)} pinned packages against a "
                "vulnerability database"
            ],
            [
                "pip-audit check failed: a run that audits nothing cannot pass; make the vulnerability service "
                "reachable, or acknowledge it with a dated 'unaudited * until=<date> -- <reason>' line in "
                ".ci/pip-audit-exceptions.txt."
            ],
        )
    if audited == 0:
        reasons = (
            sorted(  # "Dependency not found on PyPI and could not be audited: torch (2.13.0)" once
                {
                    dependency["skip_reason"].split(": ", 1)[0]
                    for dependency in report["dependencies"]
                    if "skip_reason" in dependency
                }
            )
        )
        banner = (
            f"pip-audit AUDITED NOTHING: 0 of {len(pins)} pinned packages were checked against a vulnerability "
            f"database ({'; '.join(reasons) or 'no package reported'}), so this check could not have found a "
            "vulnerability. It is not a pass: .ci/pip-audit-exceptions.txt acknowledges that the audit is "
            "unavailable ('unaudited *') until its date; audit the pins where PyPI's per-version JSON or OSV is "
            "reachable."
        )
        return 0, [banner], [banner]
    skipped = sorted(
        f"{dependency['name'].lower()}=={pins.get(dependency['name'].lower().replace('_', '-'), '?')}"
        for dependency in report["dependencies"]
        if "skip_reason" in dependency
    )
    return (
        0,
        [
            f"pip-audit: {audited} of {len(pins)} pinned package(s) audited, no known vulnerability; "
            f"{len(pins) - audited} NOT audited (excused in .ci/pip-audit-exceptions.txt until their dates)"
            + (f": {', '.join(skipped)}." if skipped else ".")
        ],
        [],
    )


def main() -> int:
    excused_vulnerabilities, excused_unaudited, problems = read_exceptions(
        ROOT / ".ci" / "pip-audit-exceptions.txt", datetime.date.today()
    )
    pins = pinned_versions()
    report = audit_latest_releases(run_pip_audit(), pins)
    vulnerable, not_audited, audited = verdict(
        report, pins, excused_vulnerabilities, excused_unaudited
    )
    status, out_lines, error_lines = outcome(
        vulnerable=vulnerable,
        not_audited=not_audited,
        audited=audited,
        problems=problems,
        pins=pins,
        report=report,
        excused_unaudited=excused_unaudited,
    )
    for line in out_lines:
        print(line)
    for line in error_lines:
        print(line, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
