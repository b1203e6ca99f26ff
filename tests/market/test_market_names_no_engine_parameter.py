"""The market names no engine parameter (issue 26): a job kind's parameters belong to its engine
(:mod:`workers.algorithms.registry`), which validates them, fills in their defaults (also by privacy level) and says
which of them name the queried rows; a market module that wrote one of their names would be a second owner of it.

The names are read from the engines themselves (every registered kind's name and ``keys`` and the query keys of
:mod:`workers.algorithms.schema`), so a parameter or a kind added to the registry is covered the day it is added: a
market module that wrote ``"fedkt"`` would decide something by a kind's name, which the kind's protocol should say
(issue 41). Two sets of words
are shared with other owners and stay allowed: ``privacy`` (the key of a job's :class:`workers.privacy.settings.
PrivacySettings`, the documented contract between jobs and budgets) and the fields of a labelled privacy report
(:class:`workers.privacy.reports.PrivacyReport`: FedKT's s and t, Confident-GNMax's T), which cards, ledgers and
price quotes show. Migrations are history and keep the names they were written with. The pages' templates (their
tags) and scripts are read too: a page that compared ``job.kind`` with a kind's name would be such an owner.
"""

import ast
import re
from dataclasses import fields
from pathlib import Path

MARKET = Path(__file__).resolve().parents[2] / "market"


def engine_parameter_names() -> set[str]:
    import workers.algorithms  # noqa: F401  (registers every job kind)
    from workers.algorithms.registry import ALGORITHMS
    from workers.algorithms.schema import QUERY_KEYS
    from workers.privacy.reports import PrivacyReport

    names = {name for algorithm in ALGORITHMS.values() for name in algorithm.keys}
    shared = {"privacy"} | {field.name for field in fields(PrivacyReport)}
    return (names | set(ALGORITHMS) | set(QUERY_KEYS)) - shared


def named_parameters(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every string literal in ``source`` that is exactly one of ``names``."""
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    )


ROOT = MARKET.parent
#: Where an engine parameter must not be named: the market, the pages, and the worker side that runs jobs for the
#: market (issue 41: the rule read market/ only, so the runner and the pages could know a kind's parameters).
CHECKED = [MARKET, ROOT / "frontend", ROOT / "workers" / "runner", ROOT / "workers" / "tasks.py"]
MARKET_MODULES = sorted(
    path
    for folder in CHECKED
    for path in ([folder] if folder.suffix == ".py" else folder.rglob("*.py"))
    if "migrations" not in path.relative_to(ROOT).parts
)


#: The pages' own code besides Python: templates (their tags, where a page could compare a kind or read a parameter)
#: and the scripts the project writes (its vendored libraries are not its code).
PAGE_TEMPLATES = sorted((ROOT / "frontend" / "templates").rglob("*.html"))
PAGE_SCRIPTS = sorted(
    path
    for path in (ROOT / "frontend" / "static").rglob("*.js")
    if "vendor" not in path.relative_to(ROOT).parts
)
TEMPLATE_TAG = re.compile(r"\{[{%](.*?)[%}]\}", re.DOTALL)
SCRIPT_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
QUOTED = re.compile(r"(['\"])([\w.]+)\1")


def named_in_page_code(source: str, names: set[str], *, template: bool) -> list[tuple[int, str]]:
    """``(line, name)`` of every quoted literal that is exactly one of ``names``: inside a template's tags
    (``{% if job.kind == "fedkt" %}``), or anywhere in a script's code (its comments are prose)."""
    spans = (
        [(match.start(1), match.group(1)) for match in TEMPLATE_TAG.finditer(source)]
        if template
        else [
            (0, SCRIPT_COMMENT.sub(lambda comment: re.sub(r"[^\n]", " ", comment.group()), source))
        ]
    )
    return sorted(
        (source.count("\n", 0, start + literal.start()) + 1, literal.group(2))
        for start, text in spans
        for literal in QUOTED.finditer(text)
        if literal.group(2) in names
    )


def test_the_engine_parameter_names_are_read_from_the_engines():
    names = engine_parameter_names()
    # FedKT's, the distillation's and the stack's own parameters, and the query both kinds read
    assert {"vote", "vote_weight_max", "final_model", "student", "aggregator"} <= names
    assert {"query_fraction", "query_count", "query", "proxy"} <= names
    assert {"fedkt", "ensemble", "distill", "stack", "cpfl"} <= names  # the kinds' names
    assert not names & {"privacy", "partitions", "teachers", "threshold"}


def test_a_module_that_names_an_engine_parameter_is_found():
    source = 'defaults = {"fedkt": {"vote": "auto"}}\nquery = params.get("query_count", 0)\n'
    assert named_parameters(source, engine_parameter_names()) == [
        (1, "fedkt"),
        (1, "vote"),
        (2, "query_count"),
    ]


def test_a_template_or_script_that_names_a_kind_or_parameter_is_found():
    names = engine_parameter_names()
    template = '<p class="vote">\n{% if job.kind == "fedkt" %}{{ job.parameters|get:\'vote\' }}{% endif %}</p>'
    assert named_in_page_code(template, names, template=True) == [(2, "fedkt"), (2, "vote")]
    script = '// "vote" in a comment is prose\nconst kind = "stack"; /* "cpfl" */ const rows = "query_count";'
    assert named_in_page_code(script, names, template=False) == [(2, "query_count"), (2, "stack")]


def test_no_market_module_names_an_engine_parameter():
    names = engine_parameter_names()
    found = {
        str(path.relative_to(ROOT)): named_parameters(path.read_text(), names)
        for path in MARKET_MODULES
    }
    found |= {
        str(path.relative_to(ROOT)): named_in_page_code(
            path.read_text(), names, template=path.suffix == ".html"
        )
        for path in [*PAGE_TEMPLATES, *PAGE_SCRIPTS]
    }
    assert {path: lines for path, lines in found.items() if lines} == {}
