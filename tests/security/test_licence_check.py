"""The CI's licence check (.ci/licence_check.py) on made-up distribution lists, and on this environment."""

import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("licence_check", ROOT / ".ci" / "licence_check.py")
licence_check = importlib.util.module_from_spec(spec)
sys.modules["licence_check"] = licence_check  # dataclasses look their module up
spec.loader.exec_module(licence_check)
POLICY = licence_check.Policy.read()


def distribution(name="example", version="1.0", expression=None, licence=None, classifiers=()):
    return licence_check.Distribution(name, version, expression, licence, tuple(classifiers))


@pytest.mark.parametrize(
    "fake",
    [
        distribution(expression="MIT"),
        distribution(expression="Apache-2.0 OR BSD-2-Clause"),
        distribution(expression="Apache-2.0 AND (MIT OR GPL-3.0-only)"),
        distribution(expression="Apache-2.0 WITH LLVM-exception AND BSL-1.0"),
        distribution(licence="Apache 2.0"),  # a free-text name the aliases know
        distribution(licence="Dual License", classifiers=["OSI Approved :: BSD License"]),
        distribution(
            licence="BSD 3-Clause License\n\nRedistribution and use ...",
            classifiers=["OSI Approved :: MIT License"],
        ),
        distribution(expression="LGPL-3.0-only"),
    ],
)
def test_allowed_licences_pass(fake):
    assert licence_check.problems([fake], POLICY) == ([], 0)


@pytest.mark.parametrize(
    ("fake", "problem"),
    [
        (
            distribution("ctgan", "0.12.1", expression="BUSL-1.1"),
            "ctgan==0.12.1: licence BUSL-1.1 is not in the allow-list",
        ),
        (
            distribution(expression="MIT AND GPL-3.0-only"),
            "licence MIT AND GPL-3.0-only is not in the allow-list",
        ),
        (distribution(expression="AGPL-3.0-or-later OR SSPL-1.0"), "is not in the allow-list"),
        (
            distribution(licence="GPL-2.0-or-later", classifiers=["OSI Approved :: MIT License"]),
            "licence GPL-2.0-or-later is not",
        ),
        (distribution(), "example==1.0: its metadata names no known licence"),
        (
            distribution(licence="Free for non-commercial use"),
            "its metadata names no known licence",
        ),
        (distribution(classifiers=["OSI Approved"]), "its metadata names no known licence"),
    ],
)
def test_a_disallowed_or_unknown_licence_fails(fake, problem):
    found, _ = licence_check.problems([distribution(expression="MIT", name="fine"), fake], POLICY)
    assert len(found) == 1 and problem in found[0]


def test_an_exception_excuses_its_version_only():
    excepted = distribution("skops", "0.16.0", classifiers=["OSI Approved"])
    assert licence_check.problems([excepted], POLICY) == ([], 1)
    found, _ = licence_check.problems(
        [distribution("skops", "0.17.0", classifiers=["OSI Approved"])], POLICY
    )
    assert found == ["skops==0.17.0: its metadata names no known licence"]


def test_an_exception_without_a_reason_or_date_is_refused(tmp_path):
    path = tmp_path / "licences.toml"
    path.write_text(
        'allowed = ["MIT"]\n[[exceptions]]\ndistribution = "x"\nversion = "1"\nlicence = "MIT"\nchecked = "soon"\n'
    )
    with pytest.raises(
        ValueError, match="needs distribution, version, licence, reason and a checked date"
    ):
        licence_check.Policy.read(path)
    every = (ROOT / ".ci" / "licences.toml").read_text()
    assert every.count("checked = 2") == len(POLICY.exceptions)
    assert all(isinstance(entry["checked"], datetime.date) for entry in POLICY.exceptions.values())


def test_this_environment_has_no_distribution_outside_the_allow_list():
    result = subprocess.run(
        [sys.executable, ROOT / ".ci" / "licence_check.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 outside the allow-list" in result.stdout
