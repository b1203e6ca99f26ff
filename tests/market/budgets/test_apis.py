import csv
import io
from decimal import Decimal

import pytest

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.jobs.spending import job_budget_reserve
from tests.fixtures.budgets import LAPLACE, ONE
from workers.privacy.costs import fedkt_l1_cost

ONE_JOB = fedkt_l1_cost(
    mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=100, partitions=2
)


def test_operator_lists_every_silos_budget(operator_api, members):
    response = operator_api.get("/api/federations/adult-income/budgets/")
    assert response.status_code == 200
    assert [
        (b["organisation"], b["epsilon_limit"], b["spent"], b["remaining"], b["delta"])
        for b in response.json()
    ] == [
        ("Contoso Bank", "10.000000", "0.000000", "10.000000", "0.00001"),
        ("Northwind Hospital", "10.000000", "0.000000", "10.000000", "0.00001"),
    ]


def test_a_silo_lists_only_its_own_budget_and_another_silos_budget_is_not_found(
    silo_api, silo_user, members
):
    response = silo_api.get("/api/federations/adult-income/budgets/")
    assert [budget["organisation"] for budget in response.json()] == ["Northwind Hospital"]
    other = PrivacyBudget.objects.exclude(organisation=silo_user.organisation).get()
    assert silo_api.get(f"/api/budgets/{other.id}/").status_code == 404
    assert (
        silo_api.patch(
            f"/api/budgets/{other.id}/", {"epsilon_limit": "50"}, format="json"
        ).status_code
        == 404
    )
    other.refresh_from_db()
    assert other.epsilon_limit == 10


def test_operator_edits_a_limit_and_a_silo_cannot(operator_api, silo_api, silo_user, members):
    silo_api.get("/api/federations/adult-income/budgets/")
    own = PrivacyBudget.objects.get(organisation=silo_user.organisation)
    assert (
        silo_api.patch(
            f"/api/budgets/{own.id}/", {"epsilon_limit": "50"}, format="json"
        ).status_code
        == 403
    )
    response = operator_api.patch(
        f"/api/budgets/{own.id}/", {"epsilon_limit": "4.5", "reason": "pilot"}, format="json"
    )
    assert response.status_code == 200
    assert (response.json()["epsilon_limit"], response.json()["remaining"]) == (
        "4.500000",
        "4.500000",
    )
    event = AuditEvent.objects.get(action="budget.limit_changed")
    assert (event.outcome, event.details["reason"], event.client_address) == (
        "success",
        "pilot",
        "127.0.0.1",
    )


def test_lowering_a_limit_below_the_spend_answers_409(operator_api, charged_job, silo_user):
    budget = PrivacyBudget.objects.get(organisation=silo_user.organisation)
    response = operator_api.patch(
        f"/api/budgets/{budget.id}/", {"epsilon_limit": "1"}, format="json"
    )
    assert response.status_code == 409
    assert "the limit cannot go below that" in response.json()["detail"]
    budget.refresh_from_db()
    assert budget.epsilon_limit == 10
    assert AuditEvent.objects.filter(action="budget.limit_changed", outcome="refused").count() == 1


def test_a_negative_limit_is_a_400(operator_api, members):
    operator_api.get("/api/federations/adult-income/budgets/")
    budget = PrivacyBudget.objects.first()
    assert (
        operator_api.patch(
            f"/api/budgets/{budget.id}/", {"epsilon_limit": "-1"}, format="json"
        ).status_code
        == 400
    )


def test_the_ledger_filters_by_silo_job_kind_and_date(operator_api, charged_job, silo_user):
    url = "/api/federations/adult-income/budget-ledger/"
    everything = operator_api.get(url).json()
    assert [(e["kind"], e["epsilon"]) for e in everything] == [("charge", ONE)] * 2 + [
        ("reserve", ONE)
    ] * 2
    own = operator_api.get(url, {"silo": silo_user.organisation_id, "kind": "charge"}).json()
    assert [(e["organisation"], e["kind"], e["job_id"]) for e in own] == [
        ("Northwind Hospital", "charge", charged_job.id)
    ]
    assert operator_api.get(url, {"job": charged_job.id + 1}).json() == []
    assert len(operator_api.get(url, {"since": "2000-01-01", "until": "2999-12-31"}).json()) == 4
    assert operator_api.get(url, {"until": "2000-01-01"}).json() == []
    assert operator_api.get(url, {"kind": "refund"}).status_code == 400
    assert operator_api.get(url, {"since": "yesterday"}).status_code == 400


def test_data_dependent_epsilon_is_shown_to_operators_and_to_silos_only_if_the_federation_publishes_it(
    operator_api, silo_api, charged_job, federation_with_data
):
    url = "/api/federations/adult-income/budget-ledger/?kind=charge"
    assert operator_api.get(url).json()[0]["parameters"]["data_dependent"]["epsilon"] == 1.25
    [own] = silo_api.get(url).json()
    assert own["organisation"] == "Northwind Hospital" and "data_dependent" not in own["parameters"]
    federation_with_data.publish_data_dependent_epsilon = True
    federation_with_data.save()
    assert silo_api.get(url).json()[0]["parameters"]["data_dependent"]["epsilon"] == 1.25


def test_the_ledger_exports_as_csv(operator_api, charged_job):
    response = operator_api.get(
        "/api/federations/adult-income/budget-ledger/?format=csv&kind=charge"
    )
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="adult-income-privacy-ledger.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [
        (row["organisation"], row["kind"], row["epsilon"], row["spent_after"]) for row in rows
    ] == [("Contoso Bank", "charge", ONE, ONE), ("Northwind Hospital", "charge", ONE, ONE)]
    export = AuditEvent.objects.get(action="budget.ledger_exported")
    assert (export.actor.username, export.details) == (
        "olivia-operator",
        {"filters": {"kind": "charge"}},
    )


def test_pricing_is_a_dry_run_and_a_silo_sees_its_own_line_only(operator_api, silo_api, members):
    body = {"privacy": LAPLACE, "partitions": 2}
    quote = operator_api.post(
        "/api/federations/adult-income/budget-price/", body, format="json"
    ).json()
    assert quote["fits"] is True and quote["cost"]["epsilon"] == ONE_JOB.report.epsilon
    assert sorted(silo["organisation"] for silo in quote["silos"]) == [
        "Contoso Bank",
        "Northwind Hospital",
    ]
    assert all(silo["needed"] == ONE for silo in quote["silos"])
    own = silo_api.post("/api/federations/adult-income/budget-price/", body, format="json").json()
    assert [silo["organisation"] for silo in own["silos"]] == ["Northwind Hospital"]
    assert BudgetEntry.objects.count() == 0


def test_pricing_refuses_malformed_privacy_parameters(operator_api, members):
    body = {"privacy": {**LAPLACE, "gamma": None}, "partitions": 2}
    response = operator_api.post("/api/federations/adult-income/budget-price/", body, format="json")
    assert (
        response.status_code == 400
        and "'privacy.gamma' must be a positive number" in response.json()["detail"]
    )


def test_calibration_answers_the_largest_gamma_that_fits(operator_api, members):
    body = {"privacy": LAPLACE, "partitions": 2, "solve_for": "noise"}
    result = operator_api.post(
        "/api/federations/adult-income/budget-calibration/", body, format="json"
    ).json()
    assert result["parameter"] == "gamma" and result["price"]["fits"] is True
    assert Decimal(result["price"]["silos"][0]["remaining_after"]) >= 0


def test_outsiders_are_refused(api_client_for_outsider, members):
    assert api_client_for_outsider.get("/api/federations/adult-income/budgets/").status_code == 403
    assert (
        api_client_for_outsider.get("/api/federations/adult-income/budget-ledger/").status_code
        == 403
    )


@pytest.fixture
def api_client_for_outsider(db):
    from market.accounts.services import organisation_create, user_create
    from tests.conftest import api_client_for

    outsider = user_create(
        username="otto-outsider",
        password="outsider-password",
        organisation=organisation_create(name="Fabrikam"),
    )
    return api_client_for(outsider)


def test_a_silo_calibrates_against_its_own_budget_only(
    silo_api, operator, members, silo_user, make_job
):
    from market.budgets.services import budget_limit_set, budgets_ensure

    budgets_ensure(federation=make_job().federation)
    other = PrivacyBudget.objects.exclude(organisation=silo_user.organisation).get()
    budget_limit_set(budget_id=other.id, epsilon_limit="1", reason="tiny", actor=operator)
    body = {
        "privacy": LAPLACE,
        "partitions": 2,
        "solve_for": "queries",
        "organisations": [other.organisation_id],
    }
    result = silo_api.post(
        "/api/federations/adult-income/budget-calibration/", body, format="json"
    ).json()
    assert [silo["organisation"] for silo in result["price"]["silos"]] == ["Northwind Hospital"]
    assert result["value"] > 100  # ε = 10 admits more than 100 queries; Contoso's ε = 1 would not


def test_pricing_a_non_member_is_a_400(operator_api, members, db):
    from market.accounts.services import organisation_create

    stranger = organisation_create(name="Stranger Ltd")
    body = {"privacy": LAPLACE, "partitions": 2, "organisations": [stranger.id]}
    response = operator_api.post("/api/federations/adult-income/budget-price/", body, format="json")
    assert response.status_code == 400 and "must be a member" in response.json()["detail"]


def test_refusals_are_listed_for_the_operator_and_for_the_silo_they_named(
    operator_api, silo_api, other_silo_api, make_job, operator, federation_with_data
):
    from django.db import transaction

    from market.budgets.services import BudgetExceeded, budget_refusal_record

    job = make_job(privacy={**LAPLACE, "n_queries": 1000})
    try:
        with transaction.atomic():
            job_budget_reserve(job=job, actor=operator)
    except BudgetExceeded as error:
        budget_refusal_record(error=error, actor=operator, target=job)
    url = "/api/federations/adult-income/budget-refusals/"
    [refusal] = operator_api.get(url).json()
    assert refusal["message"].startswith(
        "Northwind Hospital's privacy budget in 'adult-income' has ε = 10.000000 left"
    )
    assert refusal["actor"] == "olivia-operator"
    assert (
        len(silo_api.get(url).json()) == 1 and len(other_silo_api.get(url).json()) == 1
    )  # both silos were short


def test_parameters_with_unbounded_epsilon_are_a_400_not_a_crash(operator_api, members):
    body = {"privacy": {**LAPLACE, "gamma": 1e307}, "partitions": 64}
    response = operator_api.post("/api/federations/adult-income/budget-price/", body, format="json")
    assert response.status_code == 400 and "ε is unbounded" in response.json()["detail"]
    too_big = operator_api.post(
        "/api/federations/adult-income/budget-price/",
        {"privacy": LAPLACE, "partitions": 65},
        format="json",
    )
    assert too_big.status_code == 400 and "partitions" in too_big.json()["detail"]
