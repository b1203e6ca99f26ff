#!/usr/bin/env python3
"""Fail when an installed distribution's licence is outside the allow-list of ``.ci/licences.toml``.

Onefold is released under the Apache License 2.0 (``LICENSE``), so the allow-list holds only licences compatible
with it: code an Apache-2.0 project may run, depend on and ship with unmodified.

Run by ``make check`` (``.ci/security``) with the project's interpreter, so it reads every distribution installed in
the environment the market runs and is tested in (requirements.txt and requirements-dev.txt, resolved).

Each distribution's licence comes from its metadata (``importlib.metadata``), the first of these that names only
known licences: the ``License-Expression`` field (an SPDX expression), the ``License`` field when it is one short
line (an SPDX expression, or a name the toml's ``aliases`` map to one), its ``License ::`` classifiers (several
classifiers are alternatives, as in "BSD or Apache"). An expression passes when every ``AND`` operand passes and,
for ``OR``, one alternative does; ``X WITH exception`` passes when ``X`` does (an exception only adds permissions).
A distribution whose metadata names no known licence, or only licences outside the allow-list, fails unless the
toml lists it under ``exceptions`` with its version, the licence read from its licence file, why it may be run and
the date that was checked. An exception for another version does not apply (licences change between releases).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / ".ci" / "licences.toml"
CLASSIFIER_PREFIX = "License :: "
MAX_LICENCE_FIELD = 100  # a longer License field is the licence's text, not its name
TOKEN = re.compile(r"\(|\)|[A-Za-z0-9.+\-]+")


@dataclass(frozen=True)
class Distribution:
    """What the check reads of one installed distribution."""

    name: str
    version: str
    expression: str | None
    licence: str | None
    classifiers: tuple[str, ...]

    @classmethod
    def installed(cls) -> list[Distribution]:
        found = {}
        for distribution in importlib.metadata.distributions():
            metadata = distribution.metadata
            name = metadata["Name"]
            found[name.lower()] = cls(
                name=name,
                version=distribution.version,
                expression=metadata.get("License-Expression"),
                licence=metadata.get("License"),
                classifiers=tuple(
                    classifier[len(CLASSIFIER_PREFIX) :]
                    for classifier in metadata.get_all("Classifier") or []
                    if classifier.startswith(CLASSIFIER_PREFIX)
                ),
            )
        return sorted(found.values(), key=lambda distribution: distribution.name.lower())


@dataclass(frozen=True)
class Policy:
    allowed: frozenset[str]
    aliases: dict[str, str]
    exceptions: dict[tuple[str, str], dict]

    @classmethod
    def read(cls, path: Path = POLICY) -> Policy:
        data = tomllib.loads(path.read_text())
        exceptions = {}
        for entry in data.get("exceptions", []):
            missing = {"distribution", "version", "licence", "reason", "checked"} - set(entry)
            if missing or not isinstance(entry["checked"], datetime.date):
                raise ValueError(
                    f"{path.name}: the exception {entry.get('distribution', '?')} needs distribution, version, "
                    f"licence, reason and a checked date (missing: {', '.join(sorted(missing)) or 'a date'})"
                )
            exceptions[(entry["distribution"].lower(), entry["version"])] = entry
        return cls(
            frozenset(name.lower() for name in data["allowed"]),
            {key.lower(): value for key, value in data.get("aliases", {}).items()},
            exceptions,
        )


def spdx(name: str, aliases: dict[str, str]) -> str | None:
    """The SPDX identifier a name stands for (itself when it looks like one), None when unknown."""
    known = aliases.get(name.strip().lower())
    if known is not None:
        return known
    return name.strip() if re.fullmatch(r"[A-Za-z0-9.+\-]+", name.strip()) else None


def allowed(expression: str, policy: Policy) -> bool | None:
    """Whether an SPDX expression passes the allow-list; None when it names an identifier nobody knows."""
    tokens = TOKEN.findall(expression)
    if "".join(tokens) != re.sub(r"\s+", "", expression):
        return None  # characters an SPDX expression cannot hold: a sentence, not an expression
    position = 0

    def operand() -> bool | None:
        nonlocal position
        if position >= len(tokens):
            return None
        token = tokens[position]
        position += 1
        if token == "(":
            value = disjunction()
            if position >= len(tokens) or tokens[position] != ")":
                return None
            position += 1
            return value
        if token.upper() in {"AND", "OR", "WITH", ")"}:
            return None
        if position < len(tokens) and tokens[position].upper() == "WITH":
            position += 2  # the exception's name: it only adds permissions
        identifier = spdx(token, policy.aliases)
        if identifier is None or not re.fullmatch(r"[A-Za-z0-9.+\-]+", identifier):
            return None
        if identifier.lower() in policy.allowed:
            return True
        return False if identifier.lower() in KNOWN_IDENTIFIERS or "-" in identifier else None

    def conjunction() -> bool | None:
        nonlocal position
        values = [operand()]
        while position < len(tokens) and tokens[position].upper() == "AND":
            position += 1
            values.append(operand())
        if None in values:
            return None
        return all(values)

    def disjunction() -> bool | None:
        nonlocal position
        values = [conjunction()]
        while position < len(tokens) and tokens[position].upper() == "OR":
            position += 1
            values.append(conjunction())
        if None in values:
            return None
        return any(values)

    value = disjunction()
    return value if position == len(tokens) else None


#: Identifiers of licences outside any reasonable allow-list, so that they fail as "not allowed" (not "unknown").
KNOWN_IDENTIFIERS = {"busl-1.1", "gpl", "agpl", "sspl-1.0", "proprietary"}


def licence_of(distribution: Distribution, policy: Policy) -> tuple[str | None, bool | None]:
    """(the licence expression read from the metadata, whether it passes); (None, None) when none is known."""
    candidates = [distribution.expression]
    field = (distribution.licence or "").strip()
    if field and "\n" not in field and len(field) <= MAX_LICENCE_FIELD:
        candidates.append(aliases_or(field, policy))
    if distribution.classifiers:
        names = [aliases_or(classifier, policy) for classifier in distribution.classifiers]
        candidates.append(" OR ".join(f"({name})" for name in names))
    for candidate in candidates:
        if candidate:
            verdict = allowed(candidate, policy)
            if verdict is not None:
                return candidate, verdict
    return None, None


def aliases_or(name: str, policy: Policy) -> str:
    """A free-text licence name replaced by its SPDX identifier where the toml's aliases know it."""
    return policy.aliases.get(name.strip().lower(), name.strip())


def problems(distributions: Iterable[Distribution], policy: Policy) -> tuple[list[str], int]:
    """(one line per distribution outside the allow-list and not excepted, number of excepted distributions)."""
    found, excepted = [], 0
    for distribution in distributions:
        expression, verdict = licence_of(distribution, policy)
        if verdict:
            continue
        if (distribution.name.lower(), distribution.version) in policy.exceptions:
            excepted += 1
            continue
        found.append(
            f"{distribution.name}=={distribution.version}: "
            + (
                f"licence {expression} is not in the allow-list"
                if expression
                else "its metadata names no known licence"
            )
        )
    return found, excepted


def main() -> int:
    policy = Policy.read()
    distributions = Distribution.installed()
    found, excepted = problems(distributions, policy)
    for line in found:
        print(f"licence check: {line}")
    if found:
        print(
            f"licence check FAILED: {len(found)} of {len(distributions)} installed distributions are outside the "
            "allow-list of .ci/licences.toml. Replace them, or (after reading the distribution's licence file) add "
            "a dated, justified exception there.",
            file=sys.stderr,
        )
        return 1
    print(
        f"licence check: {len(distributions)} installed distributions, 0 outside the allow-list "
        f"({excepted} by a dated exception in .ci/licences.toml)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
