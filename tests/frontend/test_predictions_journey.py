"""A predictions-only listing with a usage plan and a trial, bought in a real Chromium against a live server: the
operator lists it on its pages, the card says what access it gives and its limits, the buyer chooses the plan, gets its token once, predicts within
the trial, pays per use up to the monthly cap and is refused past it; every page on the way is axe-clean at 1280
and 390 px, and the wallet, the silos' earnings, the fees and the audit log agree to the cent."""

import json

import pytest
from django.db.models import Sum

from market.audit.models import AuditEvent
from market.commerce.models import Listing, PricingPlan, UsageCharge, Wallet
from tests.fixtures.commerce import BUYER_PASSWORD
from tests.frontend.journey_helpers import WIDTHS, page_problems, publish_from_card, sign_in


def raw_rows(frame) -> list[dict]:
    return json.loads(frame.drop(columns=["income"]).to_json(orient="records"))


def scan_both_widths(page, state: str) -> list[str]:
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        problems += page_problems(page, f"{state} @{width}px")
    return problems


@pytest.mark.browser
def test_a_buyer_predicts_in_the_trial_then_pays_per_use_up_to_the_cap_in_the_browser(
    live_server,
    transactional_db,
    page,
    operator,
    buyer_user,
    silo_user,
    other_silo_user,
    make_global_model,
    top_up,
    adult_evaluation,
):
    global_model = (
        make_global_model(  # the silos' shares of every charge: 70 % and 30 % after the fee
            privacy_level="L0",
            weights={
                str(silo_user.organisation_id): 0.7,
                str(other_silo_user.organisation_id): 0.3,
            },
        )
    )
    problems = []

    # The operator lists the model as predictions only, with limits, adds a usage plan with a trial, publishes.
    sign_in(page, live_server.url, operator.username, "operator-password")
    page.goto(f"{live_server.url}/market/models/{global_model.id}/list/")
    page.get_by_label("Name", exact=True).fill("Adult income predictions")
    page.get_by_label("Price (credits)").fill("0")
    page.get_by_label("Predictions only: an API token").check()
    page.get_by_label("Predictions only: most rows per call").fill("50")
    page.get_by_label("Predictions only: most rows per buyer per day").fill("1000")
    problems += scan_both_widths(page, "listing form")
    page.get_by_role("button", name="Create draft listing").click()
    page.locator("#add-plan summary").click()
    page.get_by_label("Plan name").fill("Pay per use")
    page.get_by_label("Monthly fee (credits)").fill("5")
    page.get_by_label("Price per 1,000 rows (credits)").fill("20")
    page.get_by_label("Monthly cap (rows; empty: none)").fill("30")
    page.get_by_label("Free trial rows").fill("10")
    problems += scan_both_widths(page, "plan form")
    page.get_by_role("button", name="Add plan").click()
    publish_from_card(page)
    listing = Listing.objects.get()
    plan = PricingPlan.objects.get()
    assert (listing.status, listing.access, listing.max_rows_per_call) == (
        "published",
        "predictions",
        50,
    )
    assert (plan.monthly_fee_cents, plan.price_per_thousand_rows_cents, plan.trial_rows) == (
        500,
        2000,
        10,
    )
    top_up(buyer_user.organisation, 1000)

    sign_in(page, live_server.url, buyer_user.username, BUYER_PASSWORD)
    page.goto(f"{live_server.url}/market/listings/{listing.id}/")
    assert page.locator("#access-statement").inner_text().startswith("Predictions only:")
    assert page.locator("#access-limits").inner_text() == (
        "To protect the model, each buyer may send at most 50 rows per call, at most 1000 rows per day."
    )
    assert "20.00 credits per 1,000 predicted rows, at most 30 rows a month" in (
        page.locator(f"#plan-{plan.id}").inner_text()
    )
    problems += scan_both_widths(page, "listing")
    page.get_by_role("link", name="Buy").click()
    assert page.locator("#balance-after").inner_text() == "5.00"
    problems += scan_both_widths(page, "confirm")
    page.get_by_role("button", name="Confirm purchase").click()
    token = page.locator("#prediction-token").input_value()
    problems += scan_both_widths(page, "token")

    raw, _, _ = adult_evaluation
    url = f"{live_server.url}/api/global-models/{listing.global_model_id}/predict/"

    def predict(rows: int):
        return page.request.post(
            url,
            data=json.dumps({"rows": raw_rows(raw.iloc[:rows])}),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )

    assert predict(10).json()["usage"]["amount_cents"] == 0  # the trial's 10 free rows
    assert predict(15).json()["usage"]["amount_cents"] == 30
    refused = predict(10)
    assert refused.status == 409
    assert refused.json()["detail"].startswith(
        "Your plan's monthly cap is 30 rows: 25 are used this month and 5 are left"
    )
    assert predict(5).json()["usage"]["remaining_cap_rows"] == 0

    page.goto(f"{live_server.url}/market/usage/")
    row = page.locator("#usage tbody tr").first
    assert "0 of 30 rows" in row.inner_text() and "0.40" in row.inner_text()
    problems += scan_both_widths(page, "usage")
    page.goto(f"{live_server.url}/market/purchases/")
    assert "Predictions only: no download." in page.locator("main").inner_text()
    problems += scan_both_widths(page, "purchases")

    sign_in(page, live_server.url, silo_user.username, "silo-password")
    page.goto(f"{live_server.url}/market/earnings/")
    assert page.locator("#earnings-from-use").inner_text().endswith("0.25 credits.")
    problems += scan_both_widths(page, "earnings")
    sign_in(page, live_server.url, operator.username, "operator-password")
    page.goto(f"{live_server.url}/market/money/")
    assert page.locator("#usage-revenue").inner_text() == "0.40 credits"
    assert page.locator("#usage-fees").inner_text() == "0.04 credits"
    problems += scan_both_widths(page, "money")
    assert problems == []

    # To the cent: what the buyer paid for use is what the market and the silos received, and the audit says so.
    wallets = {
        ("market" if wallet.is_market else wallet.organisation.name): wallet.balance_cents
        for wallet in Wallet.objects.all()
    }
    assert wallets == {
        "Fabrikam Insurance": 1000 - 500 - 40,
        "market": 50 + 4,
        "Northwind Hospital": 315 + 25,
        "Contoso Bank": 135 + 11,
    }
    audited = AuditEvent.objects.filter(action="usage.charged")
    assert sum(event.details["amount_cents"] for event in audited) == 40
    assert sum(event.details["fee_cents"] for event in audited) == 4
    assert UsageCharge.objects.aggregate(total=Sum("amount_cents"))["total"] == 40
