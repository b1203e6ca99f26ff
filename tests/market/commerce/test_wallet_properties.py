"""Property: whatever sequence of top-ups and purchase attempts happens, no balance goes negative, every
balance equals the sum of its ledger, every purchase's entries sum to zero, and a refused purchase changes
nothing."""

from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market.commerce.models import Purchase, Wallet, WalletEntry
from market.commerce.purchases import purchase_create
from market.commerce.wallets import wallet_top_up
from market.errors import Conflict

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("top_up"), st.integers(0, 1), st.integers(1, 3000)),
        st.tuples(st.just("buy"), st.integers(0, 1), st.integers(0, 2)),
    ),
    min_size=1,
    max_size=12,
)


def ledger_holds() -> None:
    for wallet in Wallet.objects.all():
        total = (
            WalletEntry.objects.filter(wallet=wallet).aggregate(total=Sum("amount_cents"))["total"]
            or 0
        )
        assert wallet.balance_cents == total >= 0
    for purchase in Purchase.objects.all():
        assert (
            WalletEntry.objects.filter(purchase=purchase).aggregate(total=Sum("amount_cents"))[
                "total"
            ]
            or 0
        ) == 0


def test_balances_never_go_negative_and_ledgers_always_balance(
    published_listing, buyer_user, other_silo_user, operator
):
    listings = [
        published_listing(price_cents=price, family=family)
        for price, family in ((999, "random_forest"), (1501, "xgboost"), (0, "mlp"))
    ]
    buyers = [buyer_user, other_silo_user]  # the bank also contributed to the models it buys

    @settings(
        max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(operations=OPERATIONS)
    def run(operations):
        with transaction.atomic():
            for number, (kind, buyer_index, value) in enumerate(operations):
                user = buyers[buyer_index]
                if kind == "top_up":
                    wallet_top_up(
                        organisation=user.organisation,
                        amount_cents=value,
                        reference=f"p-{number}",
                        actor=operator,
                    )
                else:
                    before = sorted(Wallet.objects.values_list("id", "balance_cents"))
                    try:
                        purchase_create(listing=listings[value], user=user)
                    except Conflict:
                        assert sorted(Wallet.objects.values_list("id", "balance_cents")) == before
                ledger_holds()
            transaction.set_rollback(True)

    run()
