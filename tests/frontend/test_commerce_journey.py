"""A buyer's journey in a real Chromium against a live server: catalog → model card → buy → download."""

import hashlib
from pathlib import Path

import pytest

from market.commerce.models import Purchase, Wallet
from tests.fixtures.commerce import BUYER_PASSWORD

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.mark.browser
def test_buyer_finds_buys_and_downloads_a_model(
    live_server, transactional_db, buyer_user, silo_user, published_listing, top_up, page
):
    script_errors, failed_requests = [], []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.on(
        "response",
        lambda response: (
            failed_requests.append(f"{response.status} {response.url}")
            if response.status >= 400
            else None
        ),
    )
    listing = published_listing(
        name="Adult income forest",
        price_cents=1250,
        privacy_level="L0",  # an L1 sale is split equally (docs/budgets.md)
        description="Random forest fused from two hospitals' and a bank's students.",
    )
    published_listing(name="Adult income boosted trees", family="xgboost", price_cents=900)
    top_up(buyer_user.organisation, 5000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill(buyer_user.username)
    page.get_by_label("Password").fill(BUYER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Models", exact=True).click()
    page.get_by_role("textbox", name="Search").fill("forest")
    page.get_by_role("button", name="Search").click()
    assert page.locator("#catalog-count").inner_text() == "1 model"
    page.screenshot(path=SCREENSHOTS / "market-catalog.png", full_page=True)

    page.get_by_role("link", name="Adult income forest").click()
    page.locator("#metrics-table").wait_for()
    for image in page.locator(".plots img").all():  # both plots rendered by the server
        assert image.evaluate("img => img.decode().then(() => img.naturalWidth)") > 0
    page.screenshot(path=SCREENSHOTS / "market-model-card.png", full_page=True)

    page.get_by_role("link", name="Buy").click()
    assert page.locator("#balance-before").inner_text() == "50.00"
    assert page.locator("#balance-after").inner_text() == "37.50"
    page.screenshot(path=SCREENSHOTS / "market-confirm.png", full_page=True)
    page.get_by_role("button", name="Confirm purchase").click()

    page.wait_for_url(f"{live_server.url}/market/purchases/**")
    page.get_by_text("You bought Adult income forest").wait_for()
    page.screenshot(path=SCREENSHOTS / "market-purchases.png", full_page=True)
    with page.expect_download() as download_info:
        page.get_by_role("button", name="onnx").click()
    download = download_info.value
    onnx_file = listing.global_model.files.get(format="onnx")
    assert download.suggested_filename == f"onefold-global-model-{listing.global_model_id}.onnx"
    assert hashlib.sha256(Path(download.path()).read_bytes()).hexdigest() == onnx_file.sha256

    page.get_by_role("link", name="Wallet").click()
    assert page.locator("#wallet-balance").inner_text() == "37.50 credits"
    page.screenshot(path=SCREENSHOTS / "market-wallet.png", full_page=True)
    assert Purchase.objects.get().listing_id == listing.id
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 3750

    # The hospital whose students went into the model (weight 0.7) sees its share: 0.7 × (1,250 − 125 fee).
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Username").fill(silo_user.username)
    page.get_by_label("Password").fill("silo-password")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Earnings").click()
    assert page.locator("#earnings-total").inner_text() == "7.88 credits"
    page.screenshot(path=SCREENSHOTS / "market-earnings.png", full_page=True)
    assert script_errors == [] and failed_requests == []
