"""A budget holding an L2 submission charged as declared, with a larger δ than the budget's, shows the composed δ."""

import json

from market.submissions.models import Submission
from tests.market.submissions.helpers import submit

SMALLER_DELTA = {"gamma": 0.04, "delta": 1e-6, "partitions": 2, "teachers": 5, "queries": 30}
LOOSE_DELTA = {**SMALLER_DELTA, "delta": 1e-3}


def test_the_budget_shows_the_delta_of_its_whole_spend(
    silo_api, client, silo_user, federation_with_data, model_files
):
    response = submit(
        silo_api,
        {"forest.onnx": model_files["forest.onnx"]},
        privacy_level="L2",
        declared_epsilon=2.5,
        privacy_parameters=json.dumps(SMALLER_DELTA),
    )
    assert response.status_code < 300, response.json()
    [budget] = silo_api.get("/api/federations/adult-income/budgets/").json()
    # δ_budget = 1e-5 converts the Rényi part; the declared (2.5, 1e-6) adds by basic composition: 1e-5 + 1e-6.
    assert (budget["delta"], budget["composed_delta"], budget["spent"]) == (
        "0.00001",
        "0.000011",
        "2.500000",
    )
    client.force_login(silo_user)
    page = client.get("/federations/adult-income/budgets/").content.decode()
    assert 'budget δ 0.00001 plus declared δ">0.000011</abbr>' in page


def test_a_budget_with_nothing_declared_holds_at_its_own_delta(silo_api, federation_with_data):
    [budget] = silo_api.get("/api/federations/adult-income/budgets/").json()
    assert (budget["delta"], budget["composed_delta"]) == ("0.00001", "0.00001")


def test_a_fedkt_declaration_at_a_delta_above_the_budgets_is_refused_and_nothing_charged(
    silo_api, federation_with_data, model_files
):
    """Issue 32: a declared δ of 1e-3 was accepted against a budget at δ = 1e-5 and added to its composed δ."""
    response = submit(
        silo_api,
        {"forest.onnx": model_files["forest.onnx"]},
        privacy_level="L2",
        declared_epsilon=2.5,
        privacy_parameters=json.dumps(LOOSE_DELTA),
    )
    assert (response.status_code, response.json()["detail"]) == (
        400,
        "You declared δ = 0.001, but your privacy budget in 'adult-income' holds at δ = 1e-05; train and "
        "declare at δ ≤ 1e-05.",
    )
    [budget] = silo_api.get("/api/federations/adult-income/budgets/").json()
    assert (budget["composed_delta"], budget["spent"]) == ("0.00001", "0.000000")
    assert not Submission.objects.exists()
