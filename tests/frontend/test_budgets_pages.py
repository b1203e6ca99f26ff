"""The privacy budget pages, through Django's test client (the browser journey is in test_budgets_journey.py)."""

import html
import json
from dataclasses import replace
from decimal import Decimal

import pytest

from market.audit.models import AuditEvent
from market.budgets.models import PrivacyBudget
from market.budgets.services import (
    BudgetExceeded,
    budget_limit_set,
    budget_refusal_record,
    budgets_ensure,
)
from market.jobs.spending import job_budget_charge, job_budget_reserve
from tests.fixtures.budgets import job_row, submission_row
from workers.privacy.costs import fedkt_l1_cost
from workers.privacy.reports import JobPrivacyReport


def text(response) -> str:
    return html.unescape(response.content.decode())


ONE_JOB = fedkt_l1_cost(
    mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=100, partitions=2
)


@pytest.fixture
def two_silos(federation_with_data, silo_user, other_silo_user):
    from market.federations.membership import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    budgets_ensure(federation=federation_with_data)
    return [submission_row(federation_with_data, user) for user in (silo_user, other_silo_user)]


@pytest.fixture
def spent(two_silos, federation_with_data, operator):
    job = job_row(federation_with_data, two_silos, operator)
    job_budget_reserve(job=job, actor=operator)
    dependent = replace(ONE_JOB.report, epsilon=1.25, data_dependent=True)
    job_budget_charge(
        job=job,
        privacy_report=JobPrivacyReport(
            level="L1", data_independent=ONE_JOB.report, data_dependent=dependent
        ),
    )
    return job


def test_operator_dashboard_shows_every_silo_chart_data_and_a_warning_past_80_percent(
    client, operator, spent, federation_with_data
):
    budget = PrivacyBudget.objects.get(organisation__name="Contoso Bank")
    budget_limit_set(budget_id=budget.id, epsilon_limit="6", reason="tight", actor=operator)
    client.force_login(operator)
    response = client.get("/federations/adult-income/budgets/")
    assert response.status_code == 200
    page = text(response)
    assert "Budgets past 80 %" in page and "<strong>Contoso Bank</strong> has used 89 %" in page
    assert "Northwind Hospital" in page and 'name="epsilon_limit"' in page
    strip = response.context["strip"]  # fullest first, in percent of each silo's own limit
    assert [bar["name"] for bar in strip] == ["Contoso Bank", "Northwind Hospital"]
    assert [round(bar["spent"], 1) for bar in strip] == [88.8, 53.3]
    assert '<script id="budget-timeline-data" type="application/json">' in page
    assert "<script>" not in page and " onclick=" not in page
    assert [
        (point["label"], point["state"], point["silos"]) for point in response.context["timeline"]
    ] == [(f"Job #{spent.id}", "charge", 2)]


def test_a_silo_sees_only_its_own_budget_and_no_limit_editor(client, silo_user, spent):
    client.force_login(silo_user)
    response = client.get("/federations/adult-income/budgets/")
    page = text(response)
    assert [bar["name"] for bar in response.context["strip"]] == ["Northwind Hospital"]
    assert "Contoso Bank" not in page and 'name="epsilon_limit"' not in page
    other = PrivacyBudget.objects.get(organisation__name="Contoso Bank")
    response = client.post(
        f"/federations/adult-income/budgets/{other.id}/limit/", {"epsilon_limit": "99"}
    )
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.epsilon_limit == 10


def test_operator_changes_a_limit_from_the_page_and_it_is_audited(client, operator, two_silos):
    budget = PrivacyBudget.objects.get(organisation__name="Northwind Hospital")
    client.force_login(operator)
    response = client.post(
        f"/federations/adult-income/budgets/{budget.id}/limit/",
        {"epsilon_limit": "7.5", "reason": "new agreement"},
        follow=True,
    )
    assert "Northwind Hospital's ε limit is now 7.5." in text(response)
    budget.refresh_from_db()
    assert budget.epsilon_limit == Decimal("7.5")
    event = AuditEvent.objects.get(action="budget.limit_changed")
    assert (event.details["reason"], event.outcome) == ("new agreement", "success")


def test_a_limit_below_the_spend_is_refused_with_the_sentence_on_the_page(client, operator, spent):
    budget = PrivacyBudget.objects.get(organisation__name="Northwind Hospital")
    client.force_login(operator)
    response = client.post(
        f"/federations/adult-income/budgets/{budget.id}/limit/", {"epsilon_limit": "1"}, follow=True
    )
    assert "the limit cannot go below that (you asked for 1.000000)" in text(response)
    budget.refresh_from_db()
    assert budget.epsilon_limit == 10


def test_pricing_from_the_page_shows_the_quote_and_reserves_nothing(client, operator, two_silos):
    client.force_login(operator)
    form = {
        "mechanism": "laplace",
        "noise": "0.04",
        "delta": "0.00001",
        "n_queries": "100",
        "partitions": "2",
    }
    response = client.post("/federations/adult-income/budgets/price/", form)
    quote = response.context["quote"]
    assert quote["fits"] is True and [silo["needed"] for silo in quote["silos"]] == [
        "5.325668",
        "5.325668",
    ]
    assert "This job fits every silo's remaining budget." in text(response)
    calibrated = client.post(
        "/federations/adult-income/budgets/price/", {**form, "solve_for": "queries"}
    )
    assert calibrated.context["calibration"]["parameter"] == "n_queries"
    assert "public rows fit." in text(calibrated)
    bad = client.post("/federations/adult-income/budgets/price/", {**form, "noise": "lots"})
    assert "Fill in the noise" in text(bad)
    assert not PrivacyBudget.objects.filter(reserved__gt=0).exists()


def test_refusals_are_listed_with_their_message(
    client, operator, spent, federation_with_data, two_silos
):
    job = job_row(
        federation_with_data,
        two_silos,
        operator,
        privacy={
            "mechanism": "laplace",
            "gamma": 0.04,
            "sigma": None,
            "delta": 1e-5,
            "n_queries": 300,
        },
    )
    with pytest.raises(BudgetExceeded):
        job_budget_reserve(job=job, actor=operator)
    try:
        job_budget_reserve(job=job, actor=operator)
    except BudgetExceeded as error:
        budget_refusal_record(error=error, actor=operator, target=job)
    client.force_login(operator)
    response = client.get("/federations/adult-income/budgets/")
    assert f"but a {job.get_kind_display()} job at L1 needs ε = " in text(response)


def test_ledger_page_filters_and_links_the_csv_export(client, operator, spent, silo_user):
    client.force_login(operator)
    response = client.get(
        "/federations/adult-income/budgets/ledger/",
        {"kind": "charge", "silo": silo_user.organisation_id},
    )
    entries = response.context["entries"]
    assert [(e["organisation"], e["kind"]) for e in entries] == [("Northwind Hospital", "charge")]
    assert entries[0]["parameters"]["data_dependent"]["epsilon"] == 1.25
    assert response.context["csv_url"] == (
        f"/api/federations/adult-income/budget-ledger/?silo="
        f"{silo_user.organisation_id}&kind=charge&format=csv"
    )
    csv_response = client.get(response.context["csv_url"])
    assert csv_response.status_code == 200 and csv_response.content.decode().count("\n") == 2


def test_silo_ledger_hides_the_data_dependent_epsilon(client, silo_user, spent):
    client.force_login(silo_user)
    response = client.get("/federations/adult-income/budgets/ledger/")
    assert {e["organisation"] for e in response.context["entries"]} == {"Northwind Hospital"}
    assert all("data_dependent" not in e["parameters"] for e in response.context["entries"])
    assert "data-dependent ε" not in text(response)


def test_budget_index_lists_the_federations_a_user_may_see(
    client, silo_user, other_silo_user, federation_with_data
):
    client.force_login(silo_user)
    assert "Adult income" in client.get("/budgets/").content.decode()
    client.force_login(other_silo_user)  # not a member
    assert "Adult income" not in client.get("/budgets/").content.decode()
    assert client.get("/federations/adult-income/budgets/").status_code == 403


def test_chart_data_is_json_not_markup(client, operator, two_silos):
    client.force_login(operator)
    page = client.get("/federations/adult-income/budgets/").content.decode()
    start = page.index('<script id="budget-timeline-data" type="application/json">') + len(
        '<script id="budget-timeline-data" type="application/json">'
    )
    assert json.loads(page[start : page.index("</script>", start)]) == []
