"""docs/architecture.md's examples are code: each block it shows is a module under docs/examples/, and that module
runs here (the minimal job kind as a job, the page behind its URL, the model-format checklist against the files it
names), so that a newcomer who copies an example copies code that works today. Its two inventories are read from
the project too: the market's apps from the settings, the import contracts from .importlinter."""

import configparser
import re
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from docs.examples.job_kind import MeanVote
from docs.examples.model_format import MODEL_FORMAT_CHECKLIST
from market.jobs.models import Job, JobStatus
from tests.conftest import api_client_for
from workers.algorithms.registry import ALGORITHMS, FusionAlgorithm, Member
from workers.modelio.base import FILE_EXTENSIONS, ArtifactFormat, ModelFormat

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def _shown_block(example: str) -> str:
    """The code block the document shows right after ``<!-- example: docs/examples/<example> -->``."""
    found = re.search(
        rf"<!-- example: docs/examples/{re.escape(example)} -->\n```python\n(.*?)```",
        ARCHITECTURE,
        re.S,
    )
    assert found, f"docs/architecture.md shows no block of docs/examples/{example}"
    return found.group(1)


@pytest.mark.parametrize("example", ["job_kind.py", "page.py"])
def test_the_document_shows_each_example_exactly_as_the_module_that_runs(example):
    code = (ROOT / "docs" / "examples" / example).read_text()
    assert (
        _shown_block(example) == code[code.index('"""\n\n', 3) + 5 :]
    )  # the module less its docstring


def test_the_document_lists_the_model_format_checklist_as_the_module_does():
    listed = re.findall(r"^\d+\. `([^`]+)`: (.+)$", ARCHITECTURE, re.M)
    assert listed == [(step.path, step.what) for step in MODEL_FORMAT_CHECKLIST]


def test_the_minimal_job_kind_implements_every_method_the_registry_calls():
    kind = MeanVote()
    assert isinstance(
        kind, FusionAlgorithm
    )  # the protocol lists them all: a method added there fails here
    assert kind.validate({}) == {} and kind.reads_evaluation({}) is False
    assert kind.noise_refusal({}).startswith("A mean of probabilities")
    with pytest.raises(ValueError, match="unknown_key"):
        kind.validate({"unknown_key": 1})
    estimate = kind.estimate({}, n_public=10, n_member_models=3)
    assert (estimate.training_rows, estimate.work) == (None, 30.0)
    # Two public rows, one member of two students: the mean of its students, then the arg-max of the sum.
    probabilities = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.3], [0.4, 0.6]]])
    member = Member(key="1", organisation="1", n_examples=10, validation_score=0.8, n_models=2)
    signal = kind.member_signal(probabilities, member=member, n_classes=2, params={})
    np.testing.assert_allclose(signal, [[0.8, 0.2], [0.3, 0.7]])
    assert kind.select([member, member], {}, seed=0) == [0, 1]
    fusion = kind.fuse(signal, np.zeros((2, 3)), members=[member], n_classes=2, params={}, seed=0)
    assert fusion.labels.tolist() == [0, 1] and fusion.trained.tolist() == [False, False]


def test_the_minimal_job_kind_is_accepted_at_job_creation_once_registered(
    operator, fedkt_submissions, monkeypatch
):
    """Job creation calls every method but the fusion's (validate, noise_refusal, estimate, select): a job of the
    example kind is stored and queued. (Its fusion runs in a forkserver child that imports the registered kinds
    afresh, so a kind registered by a test alone cannot run to the end; tests/workers run the real kinds.)"""
    monkeypatch.setitem(
        ALGORITHMS, "mean", MeanVote()
    )  # what register(MeanVote()) does, for this test only
    federation = fedkt_submissions[0].federation
    response = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "mean", "privacy_level": "L0", "parameters": {}, "seed": 7},
        format="json",
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get(id=response.json()["id"])
    assert (job.kind, job.parameters, job.status) == ("mean", {}, JobStatus.QUEUED)
    refused = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "mean", "privacy_level": "L1", "parameters": {}, "seed": 7},
        format="json",
    )
    assert refused.status_code == 400 and Job.objects.count() == 1


def test_the_model_format_checklist_names_files_that_exist_and_every_format_in_each():
    for step in MODEL_FORMAT_CHECKLIST:
        assert (ROOT / step.path).exists(), step.path
        if step.names_every_format:
            text = (ROOT / step.path).read_text()
            missing = [
                name
                for name in ModelFormat.__members__
                if f"ModelFormat.{name}" not in text and f"ArtifactFormat.{name}" not in text
            ]
            assert not missing, f"{step.path} does not name {missing}: {step.what}"
    assert set(FILE_EXTENSIONS) == set(ArtifactFormat)
    assert {str(value) for value in ModelFormat} <= {str(value) for value in ArtifactFormat}


@pytest.mark.urls("tests.docs.example_urls")
def test_the_example_page_shows_a_federation_to_its_member_and_sends_strangers_to_sign_in(
    client, silo_user, federation_with_data
):
    url = f"/examples/federations/{federation_with_data.slug}/classes/"
    assert client.get(url).status_code == 302  # @page: signed-in users only
    client.force_login(silo_user)
    response = client.get(url)
    assert response.status_code == 200
    assert "<li>&lt;=50K</li><li>&gt;50K</li>" in response.content.decode()
    assert client.get("/examples/federations/no-such-federation/classes/").status_code == 404


def _table(header: str) -> list[list[str]]:
    """The cells of the document's table that starts with the row ``header``, row by row."""
    rows = ARCHITECTURE.split(header + "\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_document_lists_every_app_of_the_market_and_no_other():
    listed = [app.strip("`") for app, _ in _table("| app | owns |")]
    installed = [
        app.removeprefix("market.") for app in settings.INSTALLED_APPS if app.startswith("market.")
    ]
    assert sorted(listed) == sorted(installed)


def test_the_document_explains_every_import_contract_and_no_other():
    contracts = configparser.ConfigParser()
    contracts.read(ROOT / ".importlinter")
    kept = {
        section.removeprefix("importlinter:contract:")
        for section in contracts.sections()
        if section.startswith("importlinter:contract:")
    }
    explained = {
        name
        for *_, cell in _table("| never | contract |")
        for name in re.findall(r"`([a-z-]+)`", cell)
    }
    assert explained == kept
