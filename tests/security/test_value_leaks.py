"""Contribution values leak to no one but the operator and, at L0, each silo its own (market.jobs.visibility).

A silo's value is a function of every other silo's model: whoever reads it for two silos learns how their models
compare on the federation's private evaluation rows. Every answer that shows a global model is read as every
principal — the model card (API and page), the job (API and page), the global model's API, the earnings (API and
page) — and searched for each silo's value as the API and the pages print it. At L1 and L2 the values come from
the silos' un-noised predictions, so the silos do not see even their own.
"""

import pytest
from django.test import Client

from market.jobs.models import GlobalModel
from tests.conftest import api_client_for

VALUE_A, VALUE_B = 0.1234567, 0.0456789
ERROR_A, ERROR_B = 0.0031415, 0.0027182


def _spellings(value: float) -> list[str]:
    """How a value can be printed: JSON, the pages' 4 decimals."""
    return [repr(value)[:8], f"{value:.4f}"]


def _answers(world, principal: str) -> list[str]:
    targets = world.targets
    listing = targets["listing"]["published"]["listing_id"]
    job = targets["job"][None]["job_id"]
    global_model = targets["global_model"][None]["global_model_id"]
    client = api_client_for(world.people[principal])
    page_client = Client()
    page_client.force_login(world.people[principal])
    answers = []
    for path in (
        f"/api/listings/{listing}/",
        f"/api/jobs/{job}/",
        f"/api/global-models/{global_model}/",
        "/api/earnings/",
        f"/market/listings/{listing}/",
        f"/jobs/{job}/",
        "/market/earnings/",
    ):
        response = (client if path.startswith("/api/") else page_client).get(path)
        if response.status_code == 200:
            answers.append(response.content.decode())
    return answers


def _store_values(world, level: str) -> None:
    global_model = GlobalModel.objects.get(
        id=world.targets["global_model"][None]["global_model_id"]
    )
    silo = lambda value, error, rank: {  # noqa: E731
        "shapley": {"balanced_accuracy": value, "accuracy": value},
        "standard_error": {"balanced_accuracy": error, "accuracy": error},
        "leave_one_out": {"balanced_accuracy": value / 2, "accuracy": value / 2},
        "rank": rank,
        "rank_band": "top quarter" if rank == 1 else "third quarter",
    }
    global_model.contribution_values = {
        "rule": "vote",
        "estimator": "permutation",
        "permutations": 500,
        "rows": 500,
        "measures": ["balanced_accuracy", "accuracy"],
        "grand_coalition": {"balanced_accuracy": 0.7, "accuracy": 0.8},
        "empty_coalition": {"balanced_accuracy": 0.5, "accuracy": 0.5},
        "silos": {
            str(world.people["silo_a"].organisation_id): silo(VALUE_A, ERROR_A, 1),
            str(world.people["silo_b"].organisation_id): silo(VALUE_B, ERROR_B, 2),
        },
    }
    global_model.lineage = {**(global_model.lineage or {}), "privacy_level": level}
    global_model.save(update_fields=["contribution_values", "lineage"])


def _read(world) -> dict[str, set[str]]:
    named = {"A": VALUE_A, "A error": ERROR_A, "B": VALUE_B, "B error": ERROR_B}
    found = {}
    for principal in world.people:
        answers = _answers(world, principal)
        found[principal] = {
            name
            for name, value in named.items()
            for spelling in _spellings(value)
            for answer in answers
            if spelling in answer
        }
    return found


def test_at_l0_the_operator_reads_every_value_each_silo_its_own_and_buyers_none(world):
    _store_values(world, "L0")
    found = _read(world)
    assert found["operator"] == {"A", "A error", "B", "B error"}
    assert found["silo_a"] == {"A", "A error"}
    assert found["silo_b"] == {"B", "B error"}
    assert found["buyer_a"] == found["buyer_b"] == set()
    own = api_client_for(world.people["silo_a"]).get("/api/earnings/").json()
    assert [row["rank_band"] for row in own["contribution_values"]] == ["top quarter"]
    assert "rank" not in own["contribution_values"][0]
    model = (
        api_client_for(world.people["silo_b"])
        .get(f"/api/global-models/{world.targets['global_model'][None]['global_model_id']}/")
        .json()
    )
    assert list(model["contribution_values"]["silos"]) == [
        str(world.people["silo_b"].organisation_id)
    ]
    assert set(
        model["contribution_values"]["silos"][str(world.people["silo_b"].organisation_id)]
    ) == {
        "shapley",
        "standard_error",
        "rank_band",
    }


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_at_l1_and_l2_only_the_operator_reads_any_value(world, level):
    _store_values(world, level)
    found = _read(world)
    assert found["operator"] == {"A", "A error", "B", "B error"}
    for principal in ("silo_a", "silo_b", "buyer_a", "buyer_b"):
        assert found[principal] == set(), f"{principal} reads {found[principal]}"
    assert (
        api_client_for(world.people["silo_a"]).get("/api/earnings/").json()["contribution_values"]
        == []
    )
