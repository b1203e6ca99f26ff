"""Market pages with Django's test client: they show what the commerce services and selectors return."""

import html
import re

from market.commerce.delivery import RAW_ONNX
from market.commerce.models import Purchase, Wallet
from market.commerce.packages import download_choices, raw_column_model, usage_snippet
from market.commerce.purchases import purchase_create
from market.storage import artifact_read, sha256_of


def signed_in(client, user):
    client.force_login(user)
    return client


def test_catalog_page_searches_and_links_model_cards(client, buyer_user, published_listing):
    published_listing(name="Forest income model", price_cents=1250)
    published_listing(
        name="Boosted income model", family="xgboost", description="Gradient boosting."
    )
    page = signed_in(client, buyer_user).get("/market/?search=forest").content.decode()
    assert "Forest income model" in page and "Boosted income model" not in page
    assert "12.50 credits" in page
    assert "1 model" in page


def test_listing_page_shows_the_generated_card_and_plots(client, buyer_user, published_listing):
    listing = published_listing(price_cents=1250)
    page = signed_in(client, buyer_user).get(f"/market/listings/{listing.id}/").content.decode()
    assert f'src="/api/listings/{listing.id}/confusion-matrix.png"' in page
    assert f'src="/api/listings/{listing.id}/reliability.png"' in page
    assert re.search(
        r'id="public-epsilon">2.5: <strong id="epsilon-protection">moderate protection</strong> '
        r"\(data-independent upper bound;",
        page,
    )
    assert "Best single silo" in page and "Contributions" not in page
    assert (
        client.get(f"/api/listings/{listing.id}/reliability.png").status_code == 200
    )  # session works for images


def test_the_card_shows_the_terms_before_purchase(
    client, buyer_user, published_listing, adult_training
):
    """Before paying: the raw input columns (not the encoding's width), every format the buyer could download with
    its size and SHA-256 (those of the very bytes a download gives), and the snippet the model's page shows."""
    listing = published_listing(price_cents=1250)
    global_model = listing.global_model
    page = signed_in(client, buyer_user).get(f"/market/listings/{listing.id}/").content.decode()

    columns = [column["name"] for column in global_model.job.public_dataset.feature_spec["columns"]]
    listed = re.search(r'id="input-columns">(.*?)</dd>', page).group(1)
    assert re.findall(r"<code>([^<]+)</code>", listed) == columns
    assert f"{len(columns)} raw columns" in listed and "encoding" not in listed
    downloads = re.search(r'id="downloads-table"[^>]*>(.*?)</table>', page, re.S).group(1)
    offered = [choice.format for choice in download_choices(global_model)]
    assert re.findall(
        r"</span></td><td>[^<]+</td><td class=\"hash\"><code>([0-9a-f]{64})</code>", downloads
    )
    assert re.findall(r"<code>([a-z_]+)</code><br>", downloads) == offered
    assert offered[0] == RAW_ONNX and set(offered[1:]) == {
        model_file.format for model_file in global_model.files.all()
    }
    raw = raw_column_model(global_model)
    assert f"<code>{sha256_of(raw)}</code>" in downloads  # the SHA-256 of what a download gives
    snippet = re.search(r'id="usage-snippet" tabindex="0"><code>(.*?)</code>', page, re.S).group(1)
    assert html.unescape(snippet) == usage_snippet(global_model)
    assert Purchase.objects.count() == 0


def test_buying_from_the_confirmation_shows_balances_and_charges_once(
    client, buyer_user, published_listing, top_up
):
    listing = published_listing(price_cents=1250)
    top_up(buyer_user.organisation, 5000)
    confirm = (
        signed_in(client, buyer_user).get(f"/market/listings/{listing.id}/buy/").content.decode()
    )
    assert re.search(r'id="balance-before">50.00<', confirm) and re.search(
        r'id="balance-after">37.50<', confirm
    )
    key = re.search(r'name="idempotency_key" value="([^"]+)"', confirm).group(1)

    first = client.post(f"/market/listings/{listing.id}/purchase/", {"idempotency_key": key})
    resent = client.post(
        f"/market/listings/{listing.id}/purchase/", {"idempotency_key": key}
    )  # a double click

    assert first.status_code == resent.status_code == 302
    assert Purchase.objects.count() == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 3750
    purchases = client.get("/market/purchases/").content.decode()
    assert "You bought" in purchases and ">skops<" in purchases and ">onnx<" in purchases
    wallet = client.get("/market/wallet/").content.decode()
    assert 'id="wallet-balance">37.50 credits' in wallet and "−12.50" in wallet


def test_download_button_redirects_to_a_signed_link(
    client, buyer_user, silo_user, published_listing
):
    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    response = signed_in(client, buyer_user).post(
        f"/market/models/{listing.global_model_id}/download/", {"format": "onnx"}
    )
    assert response.status_code == 302 and response["Location"].startswith("/api/downloads/")
    data = b"".join(client.get(response["Location"]).streaming_content)
    assert data == artifact_read(listing.global_model.files.get(format="onnx").stored_name)
    client.force_login(silo_user)
    refused = client.post(f"/market/models/{listing.global_model_id}/download/", {"format": "onnx"})
    assert refused.status_code == 404


def test_earnings_page_lists_shares_per_listing_and_purchase(
    client, buyer_user, silo_user, published_listing, top_up
):
    listing = published_listing(
        price_cents=1000, name="Forest income model", privacy_level="L0"
    )  # an L1 sale is split equally
    top_up(buyer_user.organisation, 1000)
    purchase = purchase_create(listing=listing, user=buyer_user).purchase
    page = signed_in(client, silo_user).get("/market/earnings/").content.decode()
    assert 'id="earnings-total">6.30 credits' in page
    assert f"#{purchase.id}" in page and "Forest income model" in page


def test_operator_publishes_and_retires_from_the_listing_page(
    client, operator, buyer_user, make_global_model
):
    from market.commerce.models import Listing
    from market.commerce.services import listing_create

    listing = listing_create(
        global_model=make_global_model(),
        name="Draft income model",
        description="",
        licence_text="Any lawful use.",
        price_cents=100,
        actor=operator,
    )
    assert (
        signed_in(client, buyer_user).post(f"/market/listings/{listing.id}/publish/").status_code
        == 404
    )
    assert Listing.objects.get().status == "draft"
    client.force_login(operator)
    assert "Publish</button>" in client.get(f"/market/listings/{listing.id}/").content.decode()
    client.post(f"/market/listings/{listing.id}/publish/")
    assert Listing.objects.get().status == "published"
    client.post(f"/market/listings/{listing.id}/retire/")
    assert Listing.objects.get().status == "retired"


def test_the_catalog_price_filter_is_in_credits_with_cents_like_the_prices_shown(
    client, buyer_user, published_listing
):
    published_listing(name="Forest income model", price_cents=1250)
    signed_in(client, buyer_user)

    at_the_price = client.get("/market/?max_credits=12.50").content.decode()
    one_cent_below = client.get("/market/?max_credits=12.49").content.decode()
    above = client.get("/market/?min_credits=12.51").content.decode()
    not_a_number = client.get("/market/?max_credits=30e")
    too_fine = client.get("/market/?max_credits=12.505")

    assert (
        "Forest income model" in at_the_price
        and 'name="max_credits" min="0" step="0.01"' in at_the_price
    )
    assert 'value="12.50"' in at_the_price
    assert "Forest income model" not in one_cent_below and "Forest income model" not in above
    assert (
        not_a_number.status_code == 400
        and "an amount of credits such as 12.50" in not_a_number.content.decode()
    )
    assert too_fine.status_code == 400 and "at most two decimals" in too_fine.content.decode()


def test_the_catalogs_accuracy_filter_takes_a_percentage_as_cards_show_it(
    client, buyer_user, published_listing
):
    listing = published_listing(name="Forest income model", price_cents=1250)
    shown = f"{100 * listing.accuracy:.1f} %"
    signed_in(client, buyer_user)
    below = client.get(f"/market/?min_accuracy_percent={100 * listing.accuracy - 1:.1f}")
    above = client.get(f"/market/?min_accuracy_percent={100 * listing.accuracy + 1:.1f}")
    assert "Forest income model" in below.content.decode() and shown in below.content.decode()
    assert "Forest income model" not in above.content.decode()
    assert 'id="min_accuracy_percent"' in below.content.decode()
    refused = client.get("/market/?min_accuracy_percent=150")
    assert refused.status_code == 400
    assert "a percentage from 0 to 100" in refused.content.decode()
