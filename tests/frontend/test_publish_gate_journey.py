"""An operator's journey in a real Chromium: publishing a model no better than the majority-class guess is refused
with the numbers, the operator overrides with a written reason, and buyers see the warning on the card."""

from pathlib import Path

import pytest

from market.audit.models import AuditEvent
from market.commerce.models import Listing
from market.commerce.services import listing_create
from tests.fixtures.commerce import BUYER_PASSWORD, metrics_finding
from tests.frontend.journey_helpers import sign_in

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.mark.browser
def test_operator_is_refused_then_overrides_with_a_reason_and_buyers_see_the_warning(
    live_server, transactional_db, operator, buyer_user, make_global_model, page
):
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    global_model = make_global_model(
        metrics=metrics_finding(6)
    )  # balanced accuracy 52.5 %, the guess 50.0 %
    listing = listing_create(
        global_model=global_model,
        name="Nearly constant income model",
        description="",
        licence_text="Any lawful use.",
        price_cents=900,
        actor=operator,
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    sign_in(page, live_server.url, operator.username, "operator-password")
    page.goto(f"{live_server.url}/market/listings/{listing.id}/")
    page.get_by_role("button", name="Publish", exact=True).click()

    refusal = page.locator("#publish-refusal")
    assert refusal.inner_text().startswith(
        f"Global model #{global_model.id} does not beat the majority-class guess (always '<=50K') by at least "
        "5.0 points of balanced accuracy: it scores 52.5 % and the guess 50.0 %, only 2.5 points above it"
    )
    assert Listing.objects.get(pk=listing.pk).status == "draft"
    page.screenshot(path=SCREENSHOTS / "market-publish-refused.png", full_page=True)

    page.get_by_label("Override reason").fill(
        "A pilot buyer asked for this version to compare with its own model."
    )
    page.get_by_role("button", name="Publish anyway").click()
    page.get_by_text("Nearly constant income model is now published.").wait_for()
    assert Listing.objects.get(pk=listing.pk).publish_override_reason == (
        "A pilot buyer asked for this version to compare with its own model."
    )
    assert (
        AuditEvent.objects.filter(action="listing.publish_gate_overridden", actor=operator).count()
        == 1
    )

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, live_server.url, buyer_user.username, BUYER_PASSWORD)
    page.goto(f"{live_server.url}/market/listings/{listing.id}/")
    warning = page.locator("#quality-warnings")
    assert "Warning: read before buying" in warning.inner_text()
    assert "it scores 52.5 % and the guess 50.0 %" in warning.inner_text()
    assert "The operator's reason: A pilot buyer asked for this version" in warning.inner_text()
    assert (
        page.locator("#baseline-majority-class")
        .inner_text()
        .startswith("Majority-class guess (always “<=50K”)")
    )
    page.screenshot(path=SCREENSHOTS / "market-card-override-warning.png", full_page=True)
    assert script_errors == []
