"""The contract that keeps the pages' queries in the market's selectors (``pages-read-through-selectors`` in
.importlinter): kept by the source, broken by a page that imports a market model."""

import copy
from pathlib import Path

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.forbidden import ForbiddenContract

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "pages-read-through-selectors"


def _contract() -> ForbiddenContract:
    configuration = read_configuration(str(ROOT / ".importlinter"))
    options = next(
        options for options in configuration["contracts_options"] if options["id"] == CONTRACT
    )
    return ForbiddenContract(
        name=options["name"],
        session_options=configuration["session_options"],
        contract_options=options,
    )


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("market", "workers", "frontend", include_external_packages=True)


def test_the_pages_import_no_market_model_beyond_the_listed_exceptions(graph):
    assert (
        _contract().check(copy.deepcopy(graph), verbose=False).kept
    )  # a check drops the ignored imports


def test_a_page_that_imports_a_model_breaks_the_contract_and_is_named(graph):
    planted = copy.deepcopy(graph)
    planted.add_import(
        importer="frontend.home_views",
        imported="market.jobs.models",
        line_number=1,
        line_contents="from market.jobs.models import Job",
    )
    check = _contract().check(planted, verbose=False)
    assert not check.kept
    broken = [
        (link["importer"], link["imported"], link["line_numbers"])
        for dependency in check.metadata["invalid_chains"]
        for chain in dependency["chains"]
        for link in chain
    ]
    assert broken == [("frontend.home_views", "market.jobs.models", (1,))]
