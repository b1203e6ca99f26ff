"""The operator administers privacy budgets in a real Chromium, against a live server on PostgreSQL.

The jobs helper's launcher page did not exist when this was written: the L1 reservation and charge are made
through the budget services exactly as job_create and the job runner call them. The spend refused in the
browser is a silo's L2 upload whose declared ε exceeds its remaining budget.
"""

import json
from pathlib import Path

import pytest

from market.budgets.models import PrivacyBudget
from market.budgets.services import BudgetExceeded, budget_refusal_record
from market.jobs.spending import job_budget_charge, job_budget_reserve
from tests.fixtures.budgets import LAPLACE, job_row, submission_row
from tests.frontend.journey_helpers import budget_row, exact, sign_in
from workers.privacy.costs import fedkt_l1_cost
from workers.privacy.reports import JobPrivacyReport

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
L2_PARAMETERS = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}


def open_pricing(page):
    page.get_by_text("Price a FedKT L1 job").click()


def reserve_and_charge(federation, submission, operator, privacy):
    """What job_create and the job runner do for an L1 FedKT job: reserve, then charge after noise."""
    job = job_row(federation, [submission], operator, privacy=privacy)
    job_budget_reserve(job=job, actor=operator)
    return job


@pytest.mark.browser
def test_operator_sets_a_budget_prices_a_job_watches_the_remainder_fall_and_an_overspend_is_refused(
    live_server,
    transactional_db,
    page,
    federation_with_data,
    operator,
    silo_user,
    student_model_files,
):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    submission = submission_row(federation_with_data, silo_user)

    # The operator sets Northwind's budget to ε = 8.
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    page.get_by_role("link", name="Budgets", exact=True).click()
    page.get_by_role("link", name="Adult income").first.click()
    page.wait_for_url(f"{live_server.url}/federations/adult-income/budgets/")
    page.get_by_role("link", name="Change limit of Northwind Hospital").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("New ε limit").fill("8")
    dialog.get_by_label("Reason (kept in the audit log)").fill("pilot agreement")
    dialog.get_by_role("button", name="Save limit").click()
    page.get_by_text("Northwind Hospital's ε limit is now 8.").wait_for()
    assert exact(budget_row(page, "Northwind Hospital"), "remaining") == "8.000000"
    open_pricing(page)

    # Prices a job: γ = 0.04, 100 public rows, s = 2 needs ε = 5.325668 and fits.
    page.get_by_label("γ (Laplace) or σ (Gaussian)").fill("0.04")
    page.get_by_label("Public rows queried").fill("100")
    page.get_by_role("button", name="Price job").click()
    page.get_by_text("This job fits every silo's remaining budget.").wait_for()
    quote = page.locator("#quote tbody tr").first
    assert quote.locator("td").all_inner_texts()[:3] == ["8", "5.33", "2.67"]

    # The job is reserved (as job_create does), then charged after its noise: the remainder falls.
    job = reserve_and_charge(federation_with_data, submission, operator, LAPLACE)
    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    row = budget_row(page, "Northwind Hospital")
    assert (exact(row, "reserved"), row.locator("[data-budget-reserved]").inner_text()) == (
        "5.325668",
        "5.33",
    )
    assert exact(row, "remaining") == "2.674332"
    one_job = fedkt_l1_cost(
        mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=100, partitions=2
    )
    job_budget_charge(
        job=job,
        privacy_report=JobPrivacyReport(level="L1", data_independent=one_job.report),
    )
    page.reload()
    row = budget_row(page, "Northwind Hospital")
    assert (exact(row, "spent"), exact(row, "reserved"), exact(row, "remaining")) == (
        "5.325668",
        "0.000000",
        "2.674332",
    )
    assert page.locator(".budget-warnings").count() == 0  # 67 % used: below the 80 % warning

    # The same job again would overspend: the price says so, and a second launch is refused and audited.
    open_pricing(page)
    page.get_by_role("button", name="Price job").click()
    page.get_by_text("This job would be refused.").wait_for()
    second = job_row(federation_with_data, [submission], operator)
    with pytest.raises(BudgetExceeded) as refused:
        job_budget_reserve(job=second, actor=operator)
    budget_refusal_record(error=refused.value, actor=operator, target=second)
    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    page.locator(".refusal-message").filter(
        has_text=f"Northwind Hospital's privacy budget in 'adult-income' has ε = 2.674332 left, but a {second.get_kind_display()} job at L1"
    ).wait_for()
    page.locator("html[data-budget-charts='ready']").wait_for()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "budgets-dashboard.png", full_page=True)

    # The silo's L2 upload declaring ε = 3 (2.674332 left) is refused, with the sentence on its page.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, live_server.url, "sam-silo", "silo-password")
    page.goto(f"{live_server.url}/federations/adult-income/upload/")
    page.set_input_files(
        "#field-files",
        files=[
            {
                "name": "student.json",
                "mimeType": "application/json",
                "buffer": student_model_files[0],
            }
        ],
    )
    page.get_by_label("Model family").select_option("xgboost")
    page.get_by_label("Local training examples").fill("1000")
    page.get_by_label("Local validation score").fill("0.84")
    page.get_by_label("Privacy level").select_option("L2")
    page.get_by_label("Privacy parameters").fill(json.dumps(L2_PARAMETERS))
    page.get_by_label("Declared ε").fill("3")
    page.get_by_role("button", name="Upload").click()
    page.locator("#form-error").filter(
        has_text="Northwind Hospital's privacy budget in 'adult-income' has ε = 2.674332 left, but this "
        "submission's declared ε needs ε = 3.000000 more (example-level)."
    ).wait_for()
    page.screenshot(path=SCREENSHOTS / "budgets-refused-upload.png", full_page=True)

    budget = PrivacyBudget.objects.get(organisation=silo_user.organisation)
    assert (str(budget.spent), str(budget.reserved), str(budget.epsilon_limit)) == (
        "5.325668",
        "0.000000",
        "8.000000",
    )
    assert list(budget.entries.order_by("id").values_list("kind", flat=True)) == [
        "adjust",
        "reserve",
        "charge",
    ]

    # The silo's own dashboard shows its budget and the refusal.
    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    assert exact(budget_row(page, "Northwind Hospital"), "remaining") == "2.674332"
    # Phrased for the silo (market.budgets.selectors.budget_refusal_visible): its own remainder, no other silo's.
    page.locator(".refusal-message").filter(
        has_text="Your privacy budget in 'adult-income' has ε = 2.674332 left, but this needs ε = 3.000000 more."
    ).wait_for()
    assert script_errors == []
