"""The contract ``worker-side-reads-no-market-models`` (.importlinter) holds on the real import graph, and breaks
when one worker side imports a market model: each of them, planted on that graph, is caught."""

import configparser
import copy
from pathlib import Path

import grimp
import pytest
from importlinter import configuration
from importlinter.contracts.forbidden import ForbiddenContract

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "importlinter:contract:worker-side-reads-no-market-models"
WORKER_SIDES = (
    "workers.submission_validation",
    "workers.augmentation_training",
    "workers.exchange_aggregation",
)
LISTED = ("source_modules", "forbidden_modules", "ignore_imports")


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("market", "workers", "frontend", include_external_packages=True)


def kept(graph) -> bool:
    configuration.configure()
    sections = configparser.ConfigParser()
    sections.read(ROOT / ".importlinter")
    section = sections[CONTRACT]
    options = {
        key: value.split() if key in LISTED else value
        for key, value in section.items()
        if key not in ("name", "type")
    }
    contract = ForbiddenContract(
        name=section["name"],
        session_options={"root_packages": ["market", "workers", "frontend"]},
        contract_options=options,
    )
    return contract.check(copy.deepcopy(graph), verbose=False).kept


def test_the_worker_sides_are_the_contracts_sources_and_it_holds(graph):
    sections = configparser.ConfigParser()
    sections.read(ROOT / ".importlinter")
    assert tuple(sections[CONTRACT]["source_modules"].split()) == WORKER_SIDES
    assert kept(graph)


@pytest.mark.parametrize(
    ("worker_side", "model"),
    [
        ("workers.submission_validation", "market.submissions.models"),
        ("workers.augmentation_training", "market.augmentations.models"),
        ("workers.exchange_aggregation", "market.exchanges.models"),
        ("workers.exchange_aggregation", "market.federations.models"),
    ],
)
def test_a_planted_import_of_a_market_model_breaks_it(graph, worker_side, model):
    planted = copy.deepcopy(graph)
    planted.add_import(importer=worker_side, imported=model, line_number=1, line_contents="planted")
    assert not kept(planted)
