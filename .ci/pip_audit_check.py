#!/usr/bin/env python3
"""Audit the pinned requirements with pip-audit (PyPI's vulnerability data) and fail on anything not excused.

Fails when:
- a pinned version has a known vulnerability, unless ``.ci/pip-audit-exceptions.txt`` excuses that
  vulnerability id for that package until a date that has not passed;
- the vulnerability service cannot be reached (the audit did not happen: this is never a pass);
- a pinned version is unknown to the service (it could not be audited), unless the exceptions file
  lists that exact pin as ``unaudited`` until a date that has not passed.

Exceptions file lines: ``vulnerability <ID> <package> until=<YYYY-MM-DD> -- <reason>`` or
``unaudited <package>==<version> until=<YYYY-MM-DD> -- <reason>``; ``#`` starts a comment.
"""

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ["requirements.txt", "requirements-dev.txt"]
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


def main() -> int:
    excused_vulnerabilities, excused_unaudited, problems = read_exceptions(
        ROOT / ".ci" / "pip-audit-exceptions.txt", datetime.date.today()
    )
    pins = pinned_versions()
    vulnerable, not_audited, audited = verdict(
        run_pip_audit(), pins, excused_vulnerabilities, excused_unaudited
    )
    for line in (
        problems
        + [f"vulnerable: {item}" for item in vulnerable]
        + [f"not audited: {item}" for item in not_audited]
    ):
        print(line)
    if problems or vulnerable or not_audited:
        print(
            "pip-audit check failed: upgrade the pin, or add a dated, justified line to .ci/pip-audit-exceptions.txt.",
            file=sys.stderr,
        )
        return 1
    print(
        f"pip-audit: {audited} pinned package(s) audited, no known vulnerability; "
        f"{len(excused_unaudited)} pin(s) excused as not auditable until their dates."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
