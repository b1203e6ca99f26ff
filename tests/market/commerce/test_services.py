import pytest
from django.db import IntegrityError, connection, transaction

from market.audit.models import AuditEvent
from market.commerce.models import (
    Entitlement,
    IdempotencyKey,
    Listing,
    Purchase,
    Wallet,
    WalletEntry,
)
from market.commerce.purchases import purchase_create
from market.commerce.services import (
    listing_create,
    listing_publish,
    listing_retire,
)
from market.commerce.wallets import wallet_top_up
from market.errors import Conflict, IdempotencyKeyReused, InvalidInput, PermissionDenied


def balances() -> dict:
    return {
        ("market" if wallet.is_market else wallet.organisation.name): wallet.balance_cents
        for wallet in Wallet.objects.select_related("organisation")
    }


def test_purchase_debits_buyer_keeps_fee_and_splits_the_rest_by_contribution_weights(
    published_listing, buyer_user, silo_user, other_silo_user, top_up, settings
):
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    listing = published_listing(
        price_cents=1001, privacy_level="L0"
    )  # weights 0.7 / 0.3 (an L1 split is equal)
    top_up(buyer_user.organisation, 5000)

    result = purchase_create(listing=listing, user=buyer_user, idempotency_key="k-1")

    purchase = result.purchase
    assert not result.replayed
    # fee floor(100.1) = 100; 901 shared: 630.7 → 631, 270.3 → 270.
    assert (purchase.price_cents, purchase.fee_cents, purchase.fee_percent) == (1001, 100, 10)
    assert balances() == {
        "Fabrikam Insurance": 3999,
        "market": 100,
        "Northwind Hospital": 631,
        "Contoso Bank": 270,
    }
    entries = {
        (
            entry.wallet.organisation.name if entry.wallet.organisation else "market",
            entry.kind,
        ): entry.amount_cents
        for entry in WalletEntry.objects.filter(purchase=purchase)
    }
    assert entries == {
        ("Fabrikam Insurance", "purchase_debit"): -1001,
        ("market", "market_fee"): 100,
        ("Northwind Hospital", "revenue_credit"): 631,
        ("Contoso Bank", "revenue_credit"): 270,
    }
    assert sum(entries.values()) == 0
    assert Entitlement.objects.get().global_model_id == listing.global_model_id
    event = AuditEvent.objects.filter(action="purchase.created").get()
    assert (event.outcome, event.details["price_cents"], event.organisation_id) == (
        "success",
        1001,
        buyer_user.organisation_id,
    )


def test_repeated_idempotency_key_returns_the_first_purchase_and_charges_once(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=1000)
    top_up(buyer_user.organisation, 5000)
    first = purchase_create(listing=listing, user=buyer_user, idempotency_key="same")
    again = purchase_create(listing=listing, user=buyer_user, idempotency_key="same")

    assert again.replayed and again.purchase.id == first.purchase.id
    assert Purchase.objects.count() == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 4000


def test_same_idempotency_key_for_another_listing_is_refused_without_charging(
    published_listing, buyer_user, top_up
):
    first_listing, second_listing = (
        published_listing(price_cents=1000),
        published_listing(price_cents=500),
    )
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=first_listing, user=buyer_user, idempotency_key="same")

    with pytest.raises(IdempotencyKeyReused, match=f"already used for listing #{first_listing.id}"):
        purchase_create(listing=second_listing, user=buyer_user, idempotency_key="same")
    assert Purchase.objects.count() == 1 and IdempotencyKey.objects.count() == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 4000


def test_buying_a_model_you_own_is_refused_and_audited(published_listing, buyer_user, top_up):
    listing = published_listing(price_cents=1000)
    top_up(buyer_user.organisation, 5000)
    purchase = purchase_create(listing=listing, user=buyer_user).purchase

    with pytest.raises(Conflict, match=f"already owns this model \\(purchase #{purchase.id}\\)"):
        purchase_create(listing=listing, user=buyer_user, idempotency_key="another")
    assert Purchase.objects.count() == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 4000
    refusal = AuditEvent.objects.filter(action="purchase.created", outcome="refused").get()
    assert "already owns" in refusal.details["reason"]


def test_a_new_version_of_the_same_model_is_not_sold_twice(
    published_listing, buyer_user, operator, top_up
):
    listing = published_listing(price_cents=1000)
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=listing, user=buyer_user)
    cheaper = listing_create(
        global_model=listing.global_model,
        name="Adult income, cheaper",
        description="",
        licence_text="Any use.",
        price_cents=10,
        actor=operator,
        previous_version=listing,
    )
    listing_publish(listing=cheaper, actor=operator)

    with pytest.raises(Conflict, match="already owns"):
        purchase_create(listing=cheaper, user=buyer_user)
    listing.refresh_from_db()
    assert listing.status == "retired"  # publishing the new version retired the old one


def test_purchase_beyond_the_balance_is_refused_and_nothing_changes(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=1000)
    top_up(buyer_user.organisation, 999)
    before = balances()

    with pytest.raises(
        Conflict, match="price is 1000 cents but your wallet holds 999; top up at least 1 cents"
    ):
        purchase_create(listing=listing, user=buyer_user, idempotency_key="k")
    assert balances() == before
    assert (
        not Purchase.objects.exists()
        and not Entitlement.objects.exists()
        and not IdempotencyKey.objects.exists()
    )
    assert WalletEntry.objects.count() == 1  # the top-up


def purchase_outcome(listing, user) -> str:
    """What a purchase answered: bought, the service's refusal, or the database's (which only a defect reaches)."""
    try:  # purchase_create's own transaction: the refusal's audit event is kept
        purchase_create(listing=listing, user=user)
    except Conflict as refusal:
        return str(refusal)
    except IntegrityError as error:
        return f"the database refused: {error}"
    return "bought"


@pytest.mark.parametrize(
    "balance_cents, outcome",
    [
        (998, "The price is 1000 cents but your wallet holds 998; top up at least 2 cents."),
        (999, "The price is 1000 cents but your wallet holds 999; top up at least 1 cents."),
        (1000, "bought"),
        (1001, "bought"),
    ],
)
def test_the_service_itself_refuses_one_cent_short_and_sells_at_the_exact_price(
    published_listing, buyer_user, top_up, balance_cents, outcome
):
    """The balance check is the service's, asserted here: a check off by one cent must show as a wrong answer,
    not only as the wallet's non-negative constraint firing on the debit."""
    listing = published_listing(price_cents=1000)
    top_up(buyer_user.organisation, balance_cents)

    assert purchase_outcome(listing, buyer_user) == outcome

    wallet = Wallet.objects.get(organisation=buyer_user.organisation)
    bought = outcome == "bought"
    assert wallet.balance_cents == (balance_cents - 1000 if bought else balance_cents)
    assert Purchase.objects.count() == Entitlement.objects.count() == int(bought)
    refused = AuditEvent.objects.filter(action="purchase.created", outcome="refused")
    assert [event.details["reason"] for event in refused] == ([] if bought else [outcome])


def test_drafts_and_retired_listings_are_not_for_sale(
    published_listing, buyer_user, operator, top_up
):
    listing = published_listing(price_cents=100)
    top_up(buyer_user.organisation, 5000)
    listing_retire(listing=listing, actor=operator)
    with pytest.raises(Conflict, match="is retired, not for sale"):
        purchase_create(listing=listing, user=buyer_user)
    assert not Purchase.objects.exists()


def test_model_without_contributors_leaves_the_whole_price_to_the_market(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=700, weights={})
    top_up(buyer_user.organisation, 700)
    purchase = purchase_create(listing=listing, user=buyer_user).purchase
    assert purchase.fee_cents == 700
    assert balances() == {"Fabrikam Insurance": 0, "market": 700}


def test_operator_without_organisation_cannot_buy(published_listing, operator):
    with pytest.raises(PermissionDenied, match="operators buy nothing"):
        purchase_create(listing=published_listing(), user=operator)


def test_top_up_is_idempotent_by_reference(buyer_user, operator, other_silo_user):
    first, created = wallet_top_up(
        organisation=buyer_user.organisation, amount_cents=2500, reference="psp-1", actor=operator
    )
    again, created_again = wallet_top_up(
        organisation=buyer_user.organisation, amount_cents=2500, reference="psp-1", actor=operator
    )
    assert (created, created_again, again.id) == (True, False, first.id)
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 2500
    with pytest.raises(Conflict, match="already used for another top-up"):
        wallet_top_up(
            organisation=other_silo_user.organisation,
            amount_cents=2500,
            reference="psp-1",
            actor=operator,
        )
    with pytest.raises(Conflict):
        wallet_top_up(
            organisation=buyer_user.organisation, amount_cents=1, reference="psp-1", actor=operator
        )
    assert WalletEntry.objects.count() == 1


def test_only_operators_top_up_and_amounts_must_be_positive(buyer_user, operator):
    with pytest.raises(PermissionDenied):
        wallet_top_up(
            organisation=buyer_user.organisation, amount_cents=100, reference="r", actor=buyer_user
        )
    with pytest.raises(InvalidInput, match="between 1 and"):
        wallet_top_up(
            organisation=buyer_user.organisation, amount_cents=0, reference="r", actor=operator
        )
    assert not WalletEntry.objects.exists()


def test_database_refuses_negative_balances_and_changed_entries(buyer_user, top_up):
    entry = top_up(buyer_user.organisation, 100)
    with pytest.raises(IntegrityError), transaction.atomic():
        Wallet.objects.filter(pk=entry.wallet_id).update(balance_cents=-1)
    if connection.vendor == "postgresql":
        with pytest.raises(Exception, match="append-only"), transaction.atomic():
            WalletEntry.objects.filter(pk=entry.pk).update(amount_cents=1_000_000)
        with pytest.raises(Exception, match="append-only"), transaction.atomic():
            WalletEntry.objects.filter(pk=entry.pk).delete()
    assert WalletEntry.objects.get().amount_cents == 100


def test_published_listing_cannot_change_what_it_sells(published_listing, operator):
    listing = published_listing(price_cents=1000)
    if connection.vendor == "postgresql":
        with pytest.raises(Exception, match="cannot change"), transaction.atomic():
            Listing.objects.filter(pk=listing.pk).update(price_cents=1)
    with pytest.raises(Conflict, match="only drafts can be published"):
        listing_publish(listing=listing, actor=operator)
    listing.refresh_from_db()
    assert listing.price_cents == 1000


def test_only_operators_create_and_publish_listings(make_global_model, silo_user):
    with pytest.raises(PermissionDenied):
        listing_create(
            global_model=make_global_model(),
            name="x",
            description="",
            licence_text="y",
            price_cents=1,
            actor=silo_user,
        )
    assert not Listing.objects.exists()


def test_only_published_listings_can_be_retired(make_global_model, published_listing, operator):
    draft = listing_create(
        global_model=make_global_model(),
        name="Draft",
        description="",
        licence_text="x",
        price_cents=1,
        actor=operator,
    )
    with pytest.raises(Conflict, match="it is draft"):
        listing_retire(listing=draft, actor=operator)
    listing = listing_retire(listing=published_listing(), actor=operator)
    with pytest.raises(Conflict, match="it is retired"):
        listing_retire(listing=listing, actor=operator)
    draft.refresh_from_db()
    assert (draft.status, listing.status) == ("draft", "retired")
