"""The operator's money page and an organisation's ledger with the payout form (frontend.money_views)."""

from market.commerce.models import Wallet, WalletEntry
from market.commerce.purchases import purchase_create
from tests.frontend.journey_helpers import form_key


def test_the_money_page_shows_fees_per_sale_and_pages_and_searches_wallets(
    client, operator, buyer_user, silo_user, published_listing, top_up, settings
):
    from market.accounts.services import organisation_create

    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    top_up(buyer_user.organisation, 5000)
    purchase_create(
        listing=published_listing(price_cents=1001, privacy_level="L0"), user=buyer_user
    )
    for number in range(25):
        organisation_create(name=f"Clinic {number:02d}")
    client.force_login(operator)
    page = client.get("/market/money/").content.decode()
    assert 'id="fees-total">1.00 credits<' in page and 'id="fees-sales">1<' in page
    assert "1.00 (10 %)" in page and "Page 1 of 2" in page
    searched = client.get("/market/money/?search=northwind").content.decode()
    assert (
        f'href="/market/money/organisations/{silo_user.organisation_id}/">Northwind Hospital'
        in searched
    )
    assert "Clinic 00" not in searched and "Page 1 of" not in searched


def test_a_payout_above_the_earnings_is_refused_on_the_form_and_changes_nothing(
    client, operator, buyer_user, silo_user, published_listing, top_up, settings
):
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    top_up(buyer_user.organisation, 5000)
    purchase_create(
        listing=published_listing(price_cents=1001, privacy_level="L0"), user=buyer_user
    )
    ledger = f"/market/money/organisations/{silo_user.organisation_id}/"
    client.force_login(operator)
    key = form_key(client.get(ledger).content.decode(), 'id="payout-form"')
    refused = client.post(ledger, {"amount": "6.32", "reference": "SEPA-1", "idempotency_key": key})
    assert refused.status_code == 409
    assert "can be paid at most 6.31 credits" in refused.content.decode()
    assert Wallet.objects.get(organisation=silo_user.organisation).balance_cents == 631
    assert not WalletEntry.objects.filter(kind="payout").exists()

    client.force_login(silo_user)
    assert client.get(ledger).status_code == 403
    assert client.get("/market/money/").status_code == 403
