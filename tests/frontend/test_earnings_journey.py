"""A silo's earnings page in a real Chromium (issue 28): signed in, the silo follows the menu to Earnings and reads
its revenue share and its own contribution value with its rank band, never another silo's; axe finds no serious
violation and nothing scrolls sideways at 390 px."""

import pytest

from market.commerce.purchases import purchase_create
from tests.frontend.journey_helpers import page_problems, screenshots, sign_in


@pytest.mark.browser
def test_a_silo_reads_its_earnings_and_its_own_value_on_a_phone(
    live_server,
    transactional_db,
    buyer_user,
    silo_user,
    valued_listing,
    top_up,
    page,  # noqa: F811
):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=valued_listing, user=buyer_user)

    sign_in(page, live_server.url, silo_user.username, "silo-password")
    page.get_by_role("link", name="Earnings").click()
    page.locator("#earnings-contribution-values").wait_for()

    # 0.7 × (10.00 − 1.00 fee) by agreement (the federation's default policy)
    assert page.locator("#earnings-total").inner_text() == "6.30 credits"
    row = page.locator("#earnings-contribution-values tbody tr")
    assert row.count() == 1
    assert "+6.1" in row.inner_text() and "top quarter" in row.inner_text()
    assert ">-1.4<" not in page.content() and "Contoso Bank" not in row.inner_text()
    problems = page_problems(page, "silo earnings @1280px")
    page.set_viewport_size({"width": 390, "height": 844})
    problems += page_problems(page, "silo earnings @390px")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert problems == []
    screenshots(page, "silo-earnings-values")
    assert script_errors == []


@pytest.mark.browser
def test_a_payout_reads_as_money_received_in_the_silos_earnings_and_spending_unsigned_for_the_operator(
    live_server,
    transactional_db,
    buyer_user,
    silo_user,
    operator,
    published_listing,
    top_up,
    page,  # noqa: F811
):
    """Issue 43 item 6: a silo's payout was "−27.00" in its own earnings; money received is never negative in
    the receiver's view, and the operator's "Spent" and "Paid out" columns carry the unit and no sign."""
    from market.commerce.payouts import payout_record

    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=published_listing(price_cents=1000), user=buyer_user)
    payout_record(
        organisation=silo_user.organisation, amount_cents=300, reference="SEPA-27", actor=operator
    )

    sign_in(page, live_server.url, silo_user.username, "silo-password")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/market/earnings/")
        payouts = page.locator("#earnings-payouts")
        assert "Paid to you (credits)" in payouts.inner_text()
        cell = payouts.locator("tbody td.money")
        assert cell.inner_text() == "3.00"
    page.set_viewport_size({"width": 1280, "height": 900})

    page.context.clear_cookies()
    sign_in(page, live_server.url, operator.username, "operator-password")
    page.goto(f"{live_server.url}/market/money/?search=fabrikam")
    row = page.locator("#money-organisations tbody tr").first
    assert row.locator('td[data-label="Spent"]').inner_text() == "10.00"
    assert "Spent (credits)" in page.locator("#money-organisations thead").inner_text()
    page.goto(f"{live_server.url}/market/money/?search=northwind")
    row = page.locator("#money-organisations tbody tr").first
    assert row.locator('td[data-label="Paid out"]').inner_text() == "3.00"
    assert "−" not in page.locator("#money-organisations").inner_text()
