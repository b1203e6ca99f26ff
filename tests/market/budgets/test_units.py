"""Budget totals say their unit: party-level while only L1 jobs are charged, example-level once an example-level
spend (an L2 submission, a FAug generator) joins, with each unit's spends composed alone beside the total."""

import json

from frontend.templatetags.number_tags import epsilon as epsilon_text
from market.budgets.ledger import ledger_state
from market.budgets.models import PrivacyBudget
from market.budgets.services import epsilon_decimal
from tests.fixtures.budgets import ONE
from tests.market.submissions.helpers import submit
from workers.privacy.costs import compose_costs

EXAMPLE_NOTE = (
    "Example-level ε: it protects any one record of the silo's data. Party-level spends (L1 jobs) count at their "
    "own ε, since a party-level guarantee implies the same ε at example level; example-level spends (L2 "
    "submissions, FAug generators) give no party-level guarantee, so no party-level total covers them."
)
PARTY_NOTE = "Party-level ε: every spend so far protects the silo's whole data (L1 jobs)."
L2_PARAMETERS = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}


def test_a_budget_mixing_party_and_example_level_spends_labels_its_total_and_shows_each_unit(
    charged_job,  # noqa: F811
    silo_api,
    operator_api,
    silo_user,
    other_silo_user,
    model_files,
    client,
    operator,
):
    response = submit(
        silo_api,
        {"forest.onnx": model_files["forest.onnx"]},
        privacy_level="L2",
        declared_epsilon=2.5,
        privacy_parameters=json.dumps(L2_PARAMETERS),
    )
    assert response.status_code == 202, response.json()
    budgets = {
        budget["organisation_id"]: budget
        for budget in operator_api.get("/api/federations/adult-income/budgets/").json()
    }
    mixed, party = budgets[silo_user.organisation_id], budgets[other_silo_user.organisation_id]
    stored = PrivacyBudget.objects.get(id=mixed["id"])
    total = compose_costs(ledger_state(stored).committed(), delta=1e-5)
    assert (total.unit, total.rule) == ("example-level", "rdp+additive")
    assert mixed["spent"] == str(epsilon_decimal(total.rdp_epsilon) + epsilon_decimal(2.5))
    assert (mixed["unit"], mixed["unit_note"]) == ("example-level", EXAMPLE_NOTE)
    assert mixed["by_unit"] == [
        {"unit": "example-level", "spent": "2.500000", "reserved": "0.000000"},
        {"unit": "party-level", "spent": ONE, "reserved": "0.000000"},
    ]
    assert (party["unit"], party["unit_note"], party["spent"]) == ("party-level", PARTY_NOTE, ONE)
    assert party["by_unit"] == [{"unit": "party-level", "spent": ONE, "reserved": "0.000000"}]
    # the silo's own view carries the same labels
    [own] = silo_api.get("/api/federations/adult-income/budgets/").json()
    assert (own["unit"], own["by_unit"]) == ("example-level", mixed["by_unit"])
    client.force_login(silo_user)
    page = client.get("/federations/adult-income/budgets/").content.decode()
    # one unit on the page: named once, in the table's heading
    assert (
        'Budgets <span class="meta">· every ε <span data-budget-unit>example-level</span></span></h2>'
        in page
    )
    assert (
        '<span class="meta" data-budget-by-unit>example-level alone 2.5 · party-level alone '
        f"{epsilon_text(ONE)}</span>" in page
    )

    # budgets of both units on the operator's page: each named beside its spend
    client.force_login(operator)
    page = client.get("/federations/adult-income/budgets/").content.decode()
    assert "· every ε" not in page
    assert page.count('<span class="meta" data-budget-unit>example-level</span>') == 1
    assert page.count('<span class="meta" data-budget-unit>party-level</span>') >= 1


def test_a_budget_with_nothing_spent_says_its_unit(silo_api, federation_with_data):
    [budget] = silo_api.get("/api/federations/adult-income/budgets/").json()
    assert (budget["unit"], budget["by_unit"], budget["spent"]) == (
        "example-level",
        [],
        "0.000000",
    )
