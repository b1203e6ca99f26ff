"""Concurrent purchases against the real PostgreSQL: exactly the right number succeed, no balance goes negative,
and the ledgers balance to the cent."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from market.commerce.models import Entitlement, IdempotencyKey, Purchase, Wallet, WalletEntry
from tests.conftest import api_client_for, run_at_once
from tests.fixtures.commerce import assert_ledgers_balance

# PostgreSQL allows 100 connections here and other processes hold some, so 100 requests go through 25
# connections at a time: 25 threads released together, each sending 4 purchases back to back.
THREADS = 25


@pytest.mark.django_db(transaction=True)
def test_hundred_concurrent_purchases_with_money_for_ten_sell_exactly_ten(
    published_listing, buyer_user, top_up
):
    listings = [
        published_listing(price_cents=1000, name=f"Model {index}", privacy_level="L0")
        for index in range(100)
    ]
    top_up(buyer_user.organisation, 10_000)
    barrier = Barrier(THREADS)

    def buy_four(offset: int) -> list[int]:
        api = api_client_for(buyer_user)
        try:
            barrier.wait()
            return [
                api.post(
                    f"/api/listings/{listing.id}/purchase/",
                    HTTP_IDEMPOTENCY_KEY=f"order-{listing.id}",
                ).status_code
                for listing in listings[offset::THREADS]
            ]
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        statuses = [status for batch in pool.map(buy_four, range(THREADS)) for status in batch]

    assert sorted(statuses).count(201) == 10 and statuses.count(409) == 90
    assert (
        Purchase.objects.count()
        == 10
        == Entitlement.objects.count()
        == IdempotencyKey.objects.count()
    )
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 0
    # 10 × 1,000 cents: 10 % fee, the rest 70 / 30.
    assert {
        ("market" if wallet.is_market else wallet.organisation.name): wallet.balance_cents
        for wallet in Wallet.objects.exclude(organisation=buyer_user.organisation)
    } == {"market": 1000, "Northwind Hospital": 6300, "Contoso Bank": 2700}
    assert_ledgers_balance()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_with_one_idempotency_key_make_one_purchase(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=1500)
    top_up(buyer_user.organisation, 100_000)

    def buy(_):
        response = api_client_for(buyer_user).post(
            f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY="checkout-42"
        )
        return response.status_code, response.json()["id"], response["Idempotent-Replayed"]

    results = run_at_once(buy, list(range(20)))

    assert {(status, purchase_id) for status, purchase_id, _ in results} == {
        (201, Purchase.objects.get().id)
    }
    assert [replayed for _, _, replayed in results].count("false") == 1
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 100_000 - 1500
    assert WalletEntry.objects.filter(kind="purchase_debit").count() == 1
    assert_ledgers_balance()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_with_different_keys_buy_the_model_once(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=1500)
    top_up(buyer_user.organisation, 100_000)

    def buy(index):
        return (
            api_client_for(buyer_user)
            .post(f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY=f"checkout-{index}")
            .status_code
        )

    statuses = run_at_once(buy, list(range(20)))

    assert sorted(statuses) == [201] + [409] * 19
    assert Purchase.objects.count() == 1 == IdempotencyKey.objects.count()
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 100_000 - 1500
    assert_ledgers_balance()


@pytest.mark.django_db(transaction=True)
def test_concurrent_purchases_by_buyers_who_are_each_others_silos_do_not_deadlock(
    published_listing, silo_user, other_silo_user, top_up
):
    # Northwind buys Contoso's model while Contoso buys Northwind's: each locks the other's wallet too.
    northwind, contoso = silo_user.organisation, other_silo_user.organisation
    contoso_model = published_listing(price_cents=1000, weights={str(contoso.id): 1.0})
    northwind_model = published_listing(
        price_cents=1000, weights={str(northwind.id): 1.0}, family="xgboost"
    )
    top_up(northwind, 50_000)
    top_up(contoso, 50_000)
    orders = [(silo_user, contoso_model), (other_silo_user, northwind_model)] * 5

    def buy(order):
        user, listing = order
        return api_client_for(user).post(f"/api/listings/{listing.id}/purchase/").status_code

    statuses = run_at_once(buy, orders)

    assert sorted(statuses) == [201, 201] + [409] * 8
    assert Wallet.objects.get(organisation=northwind).balance_cents == 50_000 - 1000 + 900
    assert_ledgers_balance()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_mixing_one_shared_key_and_fresh_keys_charge_once(
    published_listing, buyer_user, top_up
):
    listing = published_listing(price_cents=1500)
    top_up(buyer_user.organisation, 100_000)
    keys = ["shared"] * 10 + [f"fresh-{index}" for index in range(10)]

    def buy(key):
        response = api_client_for(buyer_user).post(
            f"/api/listings/{listing.id}/purchase/", HTTP_IDEMPOTENCY_KEY=key
        )
        return key, response.status_code

    results = run_at_once(buy, keys)

    purchase = Purchase.objects.get()
    winner = IdempotencyKey.objects.get(purchase=purchase).key
    # The winner's key (and every repeat of it) answers 201 with the one purchase; every other request is a 409.
    expected = sorted((key, 201 if key == winner else 409) for key in keys)
    assert sorted(results) == expected
    assert Wallet.objects.get(organisation=buyer_user.organisation).balance_cents == 100_000 - 1500
    assert WalletEntry.objects.filter(kind="purchase_debit").count() == 1
    assert_ledgers_balance()
