"""L2 submissions charge the silo's declared ε when accepted; one that would overspend is refused whole."""

import json
from decimal import Decimal

import pytest

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.services import budget_limit_set, budgets_ensure
from market.submissions.models import Submission
from tests.market.submissions.helpers import stored_files, submit

L2_PARAMETERS = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}


def submit_l2(api, model_files, *, epsilon, name="forest.onnx"):
    return submit(
        api,
        {name: model_files[name]},
        privacy_level="L2",
        declared_epsilon=epsilon,
        privacy_parameters=json.dumps(L2_PARAMETERS),
    )


def silo_budget(federation, user):
    return PrivacyBudget.objects.get(federation=federation, organisation=user.organisation)


def test_an_l2_submission_charges_its_declared_epsilon(
    silo_api, silo_user, federation_with_data, model_files
):
    response = submit_l2(silo_api, model_files, epsilon=2.5)
    assert response.status_code == 202, response.json()
    budget = silo_budget(federation_with_data, silo_user)
    assert (budget.spent, budget.reserved, budget.composition_rule) == (
        Decimal("2.5"),
        0,
        "additive",
    )
    [entry] = budget.entries.all()
    assert (
        entry.kind,
        entry.epsilon,
        entry.unit,
        entry.spender_id_of("submission"),
        entry.actor_id,
    ) == (
        "charge",
        Decimal("2.5"),
        "example-level",
        response.json()["id"],
        silo_user.id,
    )
    assert (
        entry.cost["rdp"] is None
    )  # declared above its parameters' bound: charged as declared, additively


def test_an_l2_submission_declaring_exactly_its_bound_composes_through_rdp(
    silo_api, silo_user, federation_with_data, model_files
):
    first = submit_l2(silo_api, model_files, epsilon=2.5)
    bound = first.json()["privacy_report"]["epsilon"]
    second = submit_l2(silo_api, model_files, epsilon=bound, name="boosted.json")
    assert second.status_code == 202, second.json()
    budget = silo_budget(federation_with_data, silo_user)
    assert budget.composition_rule == "rdp+additive"
    assert Decimal("2.5") + Decimal(repr(bound)) - Decimal("0.000002") <= budget.spent


def test_an_l2_submission_past_the_remainder_is_refused_with_nothing_stored(
    silo_api, silo_user, operator, federation_with_data, model_files, media_root
):
    assert submit_l2(silo_api, model_files, epsilon=8.0).status_code == 202
    files_before = stored_files(media_root)
    response = submit_l2(silo_api, model_files, epsilon=2.5, name="boosted.json")
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        "Northwind Hospital's privacy budget in 'adult-income' has ε = 2.000000 left, but this submission's declared "
        "ε needs ε = 2.500000 more (example-level)."
    )
    assert Submission.objects.count() == 1 and stored_files(media_root) == files_before
    budget = silo_budget(federation_with_data, silo_user)
    assert (budget.spent, budget.entries.count()) == (Decimal(8), 1)
    event = AuditEvent.objects.get(action="budget.refused")
    assert (event.outcome, event.actor_id, event.details["silos"][0]["needed"]) == (
        "refused",
        silo_user.id,
        "2.500000",
    )


def test_l1_submissions_cost_nothing_at_upload(silo_api, federation_with_data, model_files):
    assert submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).status_code == 202
    assert BudgetEntry.objects.count() == 0


def test_a_raised_limit_admits_the_refused_submission(
    silo_api, silo_user, operator, federation_with_data, model_files
):
    budgets_ensure(federation=federation_with_data)
    budget = silo_budget(federation_with_data, silo_user)
    budget_limit_set(budget_id=budget.id, epsilon_limit="2", reason="tight", actor=operator)
    assert submit_l2(silo_api, model_files, epsilon=2.5).status_code == 409
    budget_limit_set(budget_id=budget.id, epsilon_limit="3", reason="looser", actor=operator)
    assert submit_l2(silo_api, model_files, epsilon=2.5).status_code == 202
    budget.refresh_from_db()
    assert (budget.spent, budget.remaining) == (Decimal("2.5"), Decimal("0.5"))
    assert [e.kind for e in budget.entries.order_by("id")] == ["adjust", "adjust", "charge"]


@pytest.mark.parametrize("epsilon", [10.0])
def test_a_submission_spending_exactly_the_limit_is_admitted(
    silo_api, silo_user, federation_with_data, model_files, epsilon
):
    assert submit_l2(silo_api, model_files, epsilon=epsilon).status_code == 202
    assert silo_budget(federation_with_data, silo_user).remaining == 0
