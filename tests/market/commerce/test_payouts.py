"""Silo payouts recorded by the operator: a ledger entry that takes the amount out of the silo's wallet and
earnings, never more than it earned and still holds, once per payment reference; and the operator's money reads
(fees, wallets, a ledger searched)."""

import pytest

from market.audit.models import AuditEvent
from market.commerce.models import Wallet, WalletEntry
from market.commerce.money import (
    ledger_entries,
    market_fees,
    organisations_with_money,
    payouts_of,
)
from market.commerce.payouts import payable_cents, payout_record
from market.commerce.purchases import purchase_create
from market.errors import Conflict, InvalidInput, PermissionDenied


@pytest.fixture
def sold(published_listing, buyer_user, top_up, settings):
    """One sale of 10.01 credits at a 10 % fee: Northwind Hospital earns 6.31, Contoso Bank 2.70."""
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    top_up(buyer_user.organisation, 5000)
    return purchase_create(
        listing=published_listing(price_cents=1001, privacy_level="L0"), user=buyer_user
    ).purchase


def balance_of(organisation) -> int:
    return Wallet.objects.get(organisation=organisation).balance_cents


def test_a_payout_reduces_the_silos_earnings_once_per_reference(sold, silo_user, operator):
    silo = silo_user.organisation
    assert payable_cents(organisation=silo) == 631

    entry, created = payout_record(
        organisation=silo, amount_cents=600, reference="SEPA-1", actor=operator, note="May"
    )
    again, created_again = payout_record(
        organisation=silo, amount_cents=600, reference="SEPA-1", actor=operator
    )

    assert (created, created_again, again.id) == (True, False, entry.id)
    assert (entry.kind, entry.amount_cents, entry.balance_after_cents) == ("payout", -600, 31)
    assert balance_of(silo) == 31 and payable_cents(organisation=silo) == 31
    assert list(payouts_of(organisation=silo)) == [entry]
    event = AuditEvent.objects.get(action="wallet.payout_recorded")
    assert (event.actor, event.organisation, event.details) == (
        operator,
        silo,
        {"amount_cents": 600, "reference": "SEPA-1"},
    )


def test_a_payout_cannot_exceed_what_the_silo_earned_and_changes_nothing_when_refused(
    sold, silo_user, buyer_user, operator
):
    silo = silo_user.organisation
    with pytest.raises(Conflict, match="at most 6.31 credits"):
        payout_record(organisation=silo, amount_cents=632, reference="SEPA-2", actor=operator)
    # A buyer's top-ups are not earnings: nothing to pay out.
    with pytest.raises(Conflict, match="at most 0.00 credits"):
        payout_record(
            organisation=buyer_user.organisation,
            amount_cents=1,
            reference="SEPA-3",
            actor=operator,
        )
    with pytest.raises(InvalidInput, match="payment's reference"):
        payout_record(organisation=silo, amount_cents=100, reference=" ", actor=operator)
    with pytest.raises(PermissionDenied):
        payout_record(organisation=silo, amount_cents=100, reference="SEPA-4", actor=silo_user)
    assert balance_of(silo) == 631 and not WalletEntry.objects.filter(kind="payout").exists()
    assert not AuditEvent.objects.filter(action="wallet.payout_recorded").exists()


def test_a_reference_used_for_another_entry_is_refused(sold, silo_user, operator):
    with pytest.raises(Conflict, match="already used for another ledger entry"):
        payout_record(
            organisation=silo_user.organisation,
            amount_cents=100,
            reference="test-payment-1",  # the buyer's top-up
            actor=operator,
        )
    assert balance_of(silo_user.organisation) == 631


def test_the_operator_reads_fees_wallets_and_a_searched_ledger(
    sold, silo_user, buyer_user, operator
):
    payout_record(
        organisation=silo_user.organisation, amount_cents=500, reference="SEPA-5", actor=operator
    )
    fees = market_fees(user=operator)
    assert (fees.total_fee_cents, fees.sales, fees.total_sold_cents, fees.balance_cents) == (
        100,
        1,
        1001,
        100,
    )
    rows = {
        row.name: (row.balance, row.topped_up, row.spent, row.earned, row.paid_out)
        for row in organisations_with_money(user=operator)
    }
    assert rows == {
        "Contoso Bank": (270, 0, 0, 270, 0),
        "Fabrikam Insurance": (3999, 5000, -1001, 0, 0),
        "Northwind Hospital": (131, 0, 0, 631, -500),
    }
    assert [row.name for row in organisations_with_money(user=operator, search="north")] == [
        "Northwind Hospital"
    ]
    ledger = ledger_entries(user=operator, organisation=silo_user.organisation)
    assert [entry.kind for entry in ledger] == ["payout", "revenue_credit"]
    searched = ledger_entries(user=operator, organisation=silo_user.organisation, search="sepa")
    assert [entry.reference for entry in searched] == ["SEPA-5"]
    by_kind = ledger_entries(
        user=operator, organisation=buyer_user.organisation, kind="purchase_debit"
    )
    assert [entry.amount_cents for entry in by_kind] == [-1001]
    with pytest.raises(PermissionDenied):
        market_fees(user=silo_user)


def test_the_payout_api_records_once_and_answers_bad_input_with_a_sentence(
    sold, silo_user, operator
):
    from tests.conftest import api_client_for

    api = api_client_for(operator)
    url = f"/api/organisations/{silo_user.organisation.id}/wallet/payouts/"
    first = api.post(url, {"amount_cents": 300, "reference": "SEPA-6"}, format="json")
    again = api.post(url, {"amount_cents": 300, "reference": "SEPA-6"}, format="json")
    too_much = api.post(url, {"amount_cents": 400, "reference": "SEPA-7"}, format="json")
    bad = api.post(url, {"amount_cents": "x", "reference": "SEPA-8"}, format="json")
    assert (first.status_code, again.status_code, too_much.status_code, bad.status_code) == (
        201,
        200,
        409,
        400,
    )
    assert first.json()["amount_cents"] == -300 and first.json()["kind"] == "payout"
    assert "at most 3.31 credits" in str(too_much.json())
    assert api_client_for(silo_user).post(url, {}, format="json").status_code == 403
    earnings = api_client_for(silo_user).get("/api/earnings/").json()
    assert earnings["payable_cents"] == 331
    assert [payout["reference"] for payout in earnings["payouts"]] == ["SEPA-6"]


def test_the_money_api_reads_what_the_money_page_reads_for_operators_only(
    sold, silo_user, buyer_user, operator
):
    from tests.conftest import api_client_for

    api = api_client_for(operator)
    silo = silo_user.organisation
    api.post(
        f"/api/organisations/{silo.id}/wallet/payouts/",
        {"amount_cents": 500, "reference": "SEPA-9"},
        format="json",
    )
    assert api.get("/api/money/fees/").json() == {
        "total_fee_cents": 100,
        "sales": 1,
        "total_sold_cents": 1001,
        "balance_cents": 100,
        "usage_calls": 0,
        "usage_revenue_cents": 0,
        "usage_fee_cents": 0,
    }
    sales = api.get("/api/money/sales/").json()
    assert sales["count"] == 1
    assert (sales["results"][0]["price_cents"], sales["results"][0]["fee_cents"]) == (1001, 100)
    assert sales["results"][0]["buyer_organisation_name"] == "Fabrikam Insurance"
    northwind = api.get("/api/money/organisations/", {"search": "north"}).json()
    assert northwind["count"] == 1 and northwind["results"][0] | {"id": 0} == {
        "id": 0,
        "name": "Northwind Hospital",
        "balance_cents": 131,
        "topped_up_cents": 0,
        "spent_cents": 0,
        "spent_on_use_cents": 0,
        "earned_cents": 631,
        "paid_out_cents": -500,
    }
    ledger_url = f"/api/money/organisations/{silo.id}/ledger/"
    payouts = api.get(ledger_url, {"kind": "payout"}).json()
    assert [entry["reference"] for entry in payouts["results"]] == ["SEPA-9"]
    assert api.get(ledger_url, {"search": "nothing-like-it"}).json()["count"] == 0
    # Bad input is a sentence, an unknown organisation a 404, and nobody but operators reads any of it.
    assert "kind" in api.get(ledger_url, {"kind": "gift"}).json()
    assert api.get("/api/money/organisations/", {"search": "x" * 201}).status_code == 400
    assert api.get("/api/money/organisations/999999/ledger/").status_code == 404
    for user in (silo_user, buyer_user):
        client = api_client_for(user)
        for url in (
            "/api/money/fees/",
            "/api/money/sales/",
            "/api/money/organisations/",
            ledger_url,
        ):
            assert client.get(url).status_code == 403, url


@pytest.fixture
def spent(sold, published_listing, silo_user, other_silo_user):
    """Northwind Hospital spends 3.00 of its 6.31 earnings on a model Contoso Bank alone trained: it has earned
    6.31 and not been paid, but its wallet holds 3.31."""
    contosos_own = published_listing(
        price_cents=300,
        name="Contoso's own",
        weights={str(other_silo_user.organisation_id): 1.0},
        privacy_level="L0",
    )
    purchase_create(listing=contosos_own, user=silo_user)
    assert balance_of(silo_user.organisation) == 331
    return sold


def test_a_payout_above_the_balance_but_within_the_earnings_is_a_409_that_writes_nothing(
    spent, silo_user, operator
):
    """Issue 38 item 10: the planted defect paid out up to the earnings, whatever the wallet still held."""
    from tests.conftest import api_client_for

    silo = silo_user.organisation
    response = api_client_for(operator).post(
        f"/api/organisations/{silo.id}/wallet/payouts/",
        {"amount_cents": 332, "reference": "SEPA-10"},
        format="json",
    )

    assert response.status_code == 409
    assert payable_cents(organisation=silo) == 331
    assert "Northwind Hospital can be paid at most 3.31 credits" in response.json()["detail"]
    assert "not 3.32" in response.json()["detail"]
    assert balance_of(silo) == 331 and not WalletEntry.objects.filter(kind="payout").exists()
    assert not AuditEvent.objects.filter(action="wallet.payout_recorded").exists()


def test_a_payout_of_exactly_the_balance_is_recorded_and_leaves_nothing_payable(
    spent, silo_user, operator
):
    from tests.conftest import api_client_for

    silo = silo_user.organisation
    response = api_client_for(operator).post(
        f"/api/organisations/{silo.id}/wallet/payouts/",
        {"amount_cents": 331, "reference": "SEPA-11"},
        format="json",
    )

    assert response.status_code == 201 and response.json()["amount_cents"] == -331
    assert balance_of(silo) == 0 and payable_cents(organisation=silo) == 0
    with pytest.raises(Conflict, match="at most 0.00 credits"):
        payout_record(organisation=silo, amount_cents=1, reference="SEPA-12", actor=operator)


@pytest.mark.django_db(transaction=True)
def test_concurrent_payouts_cannot_take_more_than_the_balance(spent, silo_user, operator):
    """Two payouts of 2.00 at the same moment against a balance of 3.31 (earnings 6.31): one is recorded, the
    other refused, and the wallet never goes below zero."""
    from tests.conftest import api_client_for, run_at_once

    silo = silo_user.organisation

    def pay(reference: str) -> int:
        return (
            api_client_for(operator)
            .post(
                f"/api/organisations/{silo.id}/wallet/payouts/",
                {"amount_cents": 200, "reference": reference},
                format="json",
            )
            .status_code
        )

    assert sorted(run_at_once(pay, ["SEPA-13", "SEPA-14"])) == [201, 409]
    assert balance_of(silo) == 131 and payable_cents(organisation=silo) == 131
    assert WalletEntry.objects.filter(kind="payout").count() == 1
