"""A silo's earnings page in a real Chromium (issue 28): signed in, the silo follows the menu to Earnings and reads
its revenue share and its own contribution value with its rank band, never another silo's; axe finds no serious
violation and nothing scrolls sideways at 390 px."""

import pytest

from market.commerce.purchases import purchase_create
from tests.frontend.journey_helpers import screenshots, sign_in
from tests.frontend.test_accessibility import page_problems
from tests.frontend.test_contribution_value_pages import valued_listing  # noqa: F401 (fixture)
from tests.market.commerce.conftest import *  # noqa: F401,F403 (global-model, listing, buyer and top-up fixtures)


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
    assert "0.0612" in row.inner_text() and "top quarter" in row.inner_text()
    assert "-0.0137" not in page.content() and "Contoso Bank" not in row.inner_text()
    problems = page_problems(page, "silo earnings @1280px")
    page.set_viewport_size({"width": 390, "height": 844})
    problems += page_problems(page, "silo earnings @390px")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert problems == []
    screenshots(page, "silo-earnings-values")
    assert script_errors == []
