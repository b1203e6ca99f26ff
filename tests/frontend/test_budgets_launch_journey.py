"""The operator prices and launches a real L1 FedKT job from the jobs helper's launcher and watches the budget
fall on the budget dashboard; a second launch that would overspend is refused on the launcher page.

No worker runs: a launched job stays queued holding its reservation, which is what the dashboard shows.
"""

import json
from pathlib import Path

import pytest

from market.audit.models import AuditEvent
from market.budgets.models import PrivacyBudget
from market.jobs.models import Job
from tests.frontend.journey_helpers import budget_row, exact, sign_in

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
L1_FEDKT = {
    "partitions": 2,
    "query": 100,
    "final_model": {"family": "logistic_regression"},
    "privacy": {"mechanism": "laplace", "gamma": 0.04, "delta": 1e-5},
}


def launch(page, live_server):
    page.goto(f"{live_server.url}/federations/adult-income/jobs/new/")
    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L1")
    page.get_by_text("Advanced JSON").click()
    page.get_by_label("Parameters (JSON; defaults filled in)").fill(json.dumps(L1_FEDKT))
    page.get_by_label("Parameters (JSON; defaults filled in)").dispatch_event("change")


@pytest.mark.browser
def test_operator_launches_an_l1_job_sees_the_remainder_fall_and_an_overspending_launch_is_refused(
    live_server, transactional_db, fedkt_submissions, operator, page
):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    page.get_by_role("link", name="Change limit of Northwind Hospital").click()
    page.get_by_role("dialog").get_by_label("New ε limit").fill("8")
    page.get_by_role("dialog").get_by_role("button", name="Save limit").click()
    page.get_by_text("Northwind Hospital's ε limit is now 8.").wait_for()

    launch(page, live_server)
    page.locator("#job-price").filter(has_text="Fits every budget").wait_for()
    page.get_by_role("button", name="Launch job").click()
    page.wait_for_url(f"{live_server.url}/jobs/*/")
    job = Job.objects.get()
    assert job.privacy_bound["epsilon"] == pytest.approx(5.3256670288)

    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    row = budget_row(page, "Northwind Hospital")
    assert (exact(row, "reserved"), exact(row, "remaining")) == ("5.325668", "2.674332")
    assert exact(budget_row(page, "Contoso Bank"), "remaining") == "4.674332"

    launch(page, live_server)
    page.locator("#job-price").filter(has_text="Exceeds a budget").wait_for()
    page.get_by_role("button", name="Launch job").click()
    refusal = (
        "Northwind Hospital's privacy budget in 'adult-income' has ε = 2.674332 left, but a FedKT "
    )
    page.locator("#form-error").filter(has_text=refusal).wait_for()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "budgets-launch-refused.png", full_page=True)
    assert Job.objects.count() == 1
    budget = PrivacyBudget.objects.get(organisation__name="Northwind Hospital")
    assert (str(budget.spent), str(budget.reserved)) == ("0.000000", "5.325668")
    assert AuditEvent.objects.filter(action="budget.refused").count() == 1

    page.goto(f"{live_server.url}/federations/adult-income/budgets/")
    page.locator(".refusal-message").filter(has_text=refusal).wait_for()
    assert script_errors == []
