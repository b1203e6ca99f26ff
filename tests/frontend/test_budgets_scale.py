"""The budget dashboard of a federation with 200 silos: ranked bars in percent of each limit, a summary line, one
searchable table page, and the whole page within two screen heights in Chromium (no timing is asserted)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from frontend.budget_charts import budget_overview, budget_strip, budgets_ranked
from market.accounts.models import Organisation
from market.budgets.models import PrivacyBudget
from market.federations.models import Membership
from tests.frontend.journey_helpers import sign_in

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SILOS = 200
# what sticks out past a 390 px screen (scroll boxes hold their tables; the failure message names the rest)
WIDEST = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391 && !e.closest('.table-scroll'))
  .slice(0, 8).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""
VIEWPORT = {"width": 1280, "height": 800}


def budget_like(name, spent, reserved, limit):
    return SimpleNamespace(
        organisation=SimpleNamespace(name=name),
        spent=spent,
        reserved=reserved,
        epsilon_limit=limit,
        used_fraction=(spent + reserved) / limit,
    )


def test_silos_are_ranked_by_the_share_of_their_own_limit_not_by_absolute_epsilon():
    small_but_full = budget_like("Small clinic", spent=0.8, reserved=0, limit=1)
    large_but_empty = budget_like("Large bank", spent=3, reserved=1, limit=40)

    ranked = budgets_ranked([large_but_empty, small_but_full])
    bars = budget_strip(ranked)

    assert [bar["name"] for bar in bars] == ["Small clinic", "Large bank"]
    assert (bars[0]["spent"], bars[0]["spent_y"]) == (80.0, 20.0)
    assert (bars[1]["spent"], bars[1]["reserved"], bars[1]["reserved_y"]) == (7.5, 2.5, 90.0)
    assert budget_overview(ranked) == {
        "silos": 2,
        "median_percent": 45,
        "past_warning": 1,
        "exhausted": 0,
        "warning_percent": 80,
    }


@pytest.fixture
def two_hundred_silos(federation, operator):
    organisations = Organisation.objects.bulk_create(
        [Organisation(name=f"Silo {number:03d} Regional Hospital") for number in range(SILOS)]
    )
    Membership.objects.bulk_create(
        [
            Membership(federation=federation, organisation=organisation)
            for organisation in organisations
        ]
    )
    return organisations


@pytest.mark.browser
def test_the_dashboard_of_200_silos_stays_within_two_screen_heights_and_edits_a_limit_in_a_dialog(
    live_server, transactional_db, page, federation, operator, two_hundred_silos
):
    page.set_viewport_size(VIEWPORT)
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    page.goto(f"{live_server.url}/federations/{federation.slug}/budgets/")
    page.locator("html[data-budget-charts='ready']").wait_for()

    assert page.locator(".budget-strip g").count() == SILOS
    assert page.locator("#budget-summary").inner_text().startswith(f"{SILOS} silos")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= 2 * VIEWPORT["height"], f"the dashboard is {height} px tall"
    print(f"the dashboard of {SILOS} silos is {height} px tall at {VIEWPORT['width']} px")
    page.screenshot(path=SCREENSHOTS / "budgets-200-silos-desktop.png", full_page=True)

    page.get_by_role("searchbox", name="Search silos").fill("Silo 117")
    page.get_by_role("button", name="Search").click()
    assert page.locator(".budget-table tbody th").all_inner_texts() == [
        "Silo 117 Regional Hospital"
    ]

    page.get_by_role("link", name="Change limit of Silo 117 Regional Hospital").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("New ε limit").fill("2.5")
    dialog.get_by_label("Reason (kept in the audit log)").fill("smaller pilot")
    dialog.get_by_role("button", name="Save limit").click()
    page.get_by_text("Silo 117 Regional Hospital's ε limit is now 2.5.").wait_for()
    assert (
        PrivacyBudget.objects.get(organisation__name="Silo 117 Regional Hospital").epsilon_limit
        == 2.5
    )

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/federations/{federation.slug}/budgets/")
    page.screenshot(path=SCREENSHOTS / "budgets-200-silos-phone.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, page.evaluate(WIDEST)
