"""Every page of the three roles' journeys, at 1280 px and at 390 px, scanned by axe-core in Chromium: no serious
or critical violation, and no page wider than a 390 px phone.

axe-core 4.14.1 is vendored beside this file (tests/frontend/vendor, MPL-2.0); it is evaluated through the
DevTools protocol, so the pages' Content Security Policy stays as strict as it is for users.
"""

import pytest

from market.accounts.services import organisation_create, user_create
from market.commerce.payouts import payout_record
from market.commerce.purchases import purchase_create
from market.federations.models import JoinRequest
from market.invitations.services import invitation_create
from market.notifications.models import Notification
from tests.fixtures.commerce import BUYER_PASSWORD
from tests.frontend.journey_helpers import WIDTHS, page_problems, sign_in

HUB_TABS = ("data", "submissions", "jobs", "budgets", "models", "exchanges", "members")
# After the load event (page.goto waits for it), what htmx loads by itself (the launch page's price, with
# hx-trigger "load") is scanned once it has arrived: htmx marks an element with htmx-request from the moment it
# asks until the answer is swapped in and settled. (Waiting for the network to be idle instead costs half a
# second of silence on each of the hundred or so page loads.)
HTMX_SETTLED = "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"


def scan(page, live_server, paths: list[str], role: str) -> list[str]:
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_function(HTMX_SETTLED)
            problems += page_problems(page, f"{role} {path} @{width}px")
        if width < 1000:  # the folded menu, opened
            page.goto(f"{live_server.url}/")
            page.get_by_role("button", name="Menu").click()
            problems += page_problems(page, f"{role} menu open @{width}px")
    return problems


@pytest.mark.browser
def test_every_page_of_every_role_has_no_serious_accessibility_violation_and_fits_a_phone(
    live_server,
    transactional_db,
    page,
    operator,
    silo_user,
    buyer_user,
    federation_with_data,
    published_listing,
    top_up,
):
    listing = published_listing(name="Adult income forest", price_cents=1250)
    other = published_listing(name="Adult income boosted trees", family="xgboost", price_cents=900)
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=other, user=buyer_user, idempotency_key="a11y-1")
    payout_record(
        organisation=silo_user.organisation, amount_cents=100, reference="SEPA-A11Y", actor=operator
    )
    Notification.objects.create(
        organisation=silo_user.organisation,
        kind="budget_charged",
        subject="Job #1 charged your privacy budget in Adult income",
        message="Job #1 in Adult income charged ε = 0.62, δ = 0.00001 to your privacy budget.",
        link=f"/federations/{federation_with_data.slug}/budgets/",
    )
    slug, job_id = federation_with_data.slug, listing.global_model.job_id
    waiting = user_create(
        username="wanda-waiting",
        password="waiting-password",
        organisation=organisation_create(name="Waiting Clinic"),
    )
    JoinRequest.objects.create(
        federation=federation_with_data, organisation=waiting.organisation, requested_by=waiting
    )
    _, invitation_token = invitation_create(
        user=operator,
        kind="organisation",
        organisation_name="Harbour Clinic",
        is_silo=True,
        federation=federation_with_data,
    )
    problems = []

    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    problems += scan(
        page,
        live_server,
        [
            "/",
            "/federations/",
            f"/federations/{slug}/",
            *[f"/federations/{slug}/?tab={tab}" for tab in HUB_TABS],
            f"/federations/{slug}/jobs/new/",
            f"/federations/{slug}/augmentations/new/",
            "/jobs/",
            f"/jobs/{job_id}/",
            "/budgets/",
            f"/federations/{slug}/budgets/",
            f"/federations/{slug}/budgets/ledger/",
            "/market/",
            f"/market/listings/{listing.id}/",
            "/security/audit/",
            "/security/tokens/",
            "/federations/new/",
            f"/federations/{slug}/data/",
            f"/market/models/{listing.global_model_id}/list/",
            "/market/wallets/",
            "/market/money/",
            f"/market/money/organisations/{buyer_user.organisation_id}/",
            f"/market/money/organisations/{silo_user.organisation_id}/",
            "/people/",
            f"/federations/{slug}/edit/",
        ],
        "operator",
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/federations/{slug}/budgets/")
    page.get_by_role("link", name="Change limit of Northwind Hospital").click()
    problems += page_problems(page, "operator limit dialog open")

    sign_in(page, live_server.url, "sam-silo", "silo-password")
    problems += scan(
        page,
        live_server,
        [
            "/",
            "/federations/",
            f"/federations/{slug}/",
            f"/federations/{slug}/upload/",
            "/submissions/",
            "/budgets/",
            f"/federations/{slug}/budgets/",
            "/market/earnings/",
            "/notices/",
        ],
        "silo",
    )

    sign_in(page, live_server.url, buyer_user.username, BUYER_PASSWORD)
    problems += scan(
        page,
        live_server,
        [
            "/",
            "/market/",
            f"/market/listings/{listing.id}/",
            f"/market/listings/{listing.id}/buy/",
            "/market/purchases/",
            "/market/wallet/",
            f"/market/models/{other.global_model_id}/use/",
        ],
        "buyer",
    )

    page.context.clear_cookies()
    page.goto(f"{live_server.url}/sign-in/")
    problems += page_problems(page, "sign-in")
    for width in WIDTHS:  # the page an invitation link opens, before its person has an account
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/invitations/{invitation_token}/")
        problems += page_problems(page, f"invitation acceptance @{width}px")
    assert problems == [], "\n".join(problems)
