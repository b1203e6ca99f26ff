#!/usr/bin/env python3
"""Run bandit over market/ workers/ frontend/ and fail on any finding not reviewed in .ci/bandit-reviewed.toml."""

import fnmatch
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ["market", "workers", "frontend"]


def reviewed_pairs(path: Path) -> dict[tuple[str, str], str]:
    """(file glob, test id) → the reviewer's reason."""
    entries = tomllib.loads(path.read_text())["finding"]
    return {(entry["file"], test): entry["reason"] for entry in entries for test in entry["tests"]}


def is_reviewed(finding: dict, reviewed: dict) -> bool:
    return any(
        test == finding["test_id"] and fnmatch.fnmatch(finding["filename"], pattern)
        for pattern, test in reviewed
    )


def bandit_findings() -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "bandit", "-q", "-r", *ROOTS, "-f", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if result.returncode not in (0, 1) or not result.stdout.strip():
        sys.exit(f"bandit did not run: {result.stderr.strip()}")
    report = json.loads(result.stdout)
    if report["errors"]:
        sys.exit(f"bandit could not read some files: {report['errors']}")
    return report["results"]


def unreviewed(findings: list[dict], reviewed: dict) -> list[dict]:
    return [finding for finding in findings if not is_reviewed(finding, reviewed)]


def main() -> int:
    reviewed = reviewed_pairs(ROOT / ".ci" / "bandit-reviewed.toml")
    findings = bandit_findings()
    new = unreviewed(findings, reviewed)
    for finding in new:
        print(
            f"{finding['filename']}:{finding['line_number']}: {finding['test_id']} "
            f"[{finding['issue_severity']}] {finding['issue_text']}"
        )
    stale = sorted(
        (pattern, test)
        for pattern, test in reviewed
        if not any(is_reviewed(finding, {(pattern, test): ""}) for finding in findings)
    )
    for file, test in stale:
        print(
            f"note: the reviewed {test} in {file} no longer occurs; remove it from .ci/bandit-reviewed.toml"
        )
    if new:
        print(
            f"{len(new)} unreviewed bandit finding(s): fix them, or review them in .ci/bandit-reviewed.toml "
            "with a reason and a date.",
            file=sys.stderr,
        )
        return 1
    print(f"bandit: {len(findings)} finding(s), all reviewed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
