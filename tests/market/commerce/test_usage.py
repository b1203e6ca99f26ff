"""Predictions-only listings with usage plans: the scoped token, the trial, the per-use charges split to the silos,
the monthly cap, the listing's limits, private offers, and concurrent calls charged exactly once."""

import json

import pytest
from django.db.models import Sum
from rest_framework.test import APIClient

from market.audit.models import AuditEvent
from market.commerce.models import (
    ListingAccess,
    Purchase,
    UsageCharge,
    Wallet,
    WalletEntry,
    WalletEntryKind,
)
from market.commerce.plans import plan_create
from market.commerce.services import PredictionLimits
from market.notifications.models import Notification
from tests.conftest import api_client_for, run_at_once
from tests.fixtures.commerce import assert_ledgers_balance

PREDICTIONS = {
    "access": ListingAccess.PREDICTIONS,
    "limits": PredictionLimits(max_rows_per_call=50, max_rows_per_day=1000),
}


def raw_rows(frame) -> list[dict]:
    return json.loads(frame.drop(columns=["income"]).to_json(orient="records"))


def balances() -> dict[str, int]:
    return {
        ("market" if wallet.is_market else wallet.organisation.name): wallet.balance_cents
        for wallet in Wallet.objects.all()
    }


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def usage_listing(published_listing, operator):
    """A predictions-only listing with a usage plan: 5.00 a month, 2 cents a row, a 30-row cap, 10 free rows."""

    def make(**terms):
        listing = published_listing(price_cents=0, listing_terms=PREDICTIONS, privacy_level="L0")
        plan = plan_create(
            listing=listing,
            actor=operator,
            name="Pay per use",
            kind="usage",
            **{
                "monthly_fee_cents": 500,
                "price_per_thousand_rows_cents": 2000,
                "monthly_cap_rows": 30,
                "trial_rows": 10,
                **terms,
            },
        )
        return listing, plan

    return make


def buy(buyer_api, listing, plan) -> dict:
    response = buyer_api.post(
        f"/api/listings/{listing.id}/purchase/", {"plan": plan.id}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.django_db
def test_a_buyer_predicts_in_the_trial_then_pays_per_use_up_to_the_cap_and_is_refused_past_it(
    usage_listing, buyer_user, buyer_api, top_up, adult_evaluation, silo_user, operator
):
    listing, plan = usage_listing()
    top_up(buyer_user.organisation, 1000)
    bought = buy(buyer_api, listing, plan)
    assert (bought["price_cents"], bought["fee_cents"], bought["plan"]) == (500, 50, plan.id)
    predictor = token_client(bought["api_token"])
    raw, _, _ = adult_evaluation
    url = f"/api/global-models/{listing.global_model_id}/predict/"

    trial = predictor.post(url, {"rows": raw_rows(raw.iloc[:10])}, format="json")
    assert trial.status_code == 200, trial.json()
    assert trial.json()["usage"] | {"charge": None} == {
        "charge": None,
        "replayed": False,
        "rows": 10,
        "free_rows": 10,
        "amount_cents": 0,
        "monthly_fee_cents": 0,
        "month_rows": 10,
        "remaining_cap_rows": 20,
    }
    paid = predictor.post(url, {"rows": raw_rows(raw.iloc[:15])}, format="json").json()["usage"]
    assert (paid["free_rows"], paid["amount_cents"], paid["remaining_cap_rows"]) == (0, 30, 5)
    past_cap = predictor.post(url, {"rows": raw_rows(raw.iloc[:10])}, format="json")
    assert past_cap.status_code == 409
    assert past_cap.json()["detail"] == (
        "Your plan's monthly cap is 30 rows: 25 are used this month and 5 are left, fewer than this "
        "call's 10. Nothing was charged; send at most 5 rows, or wait for next month."
    )
    last = predictor.post(url, {"rows": raw_rows(raw.iloc[:5])}, format="json").json()["usage"]
    assert (last["amount_cents"], last["remaining_cap_rows"]) == (10, 0)

    # 500 + 30 + 10 cents paid; each amount split 10 % to the market and 70 / 30 by largest remainder.
    assert balances() == {
        "Fabrikam Insurance": 460,
        "market": 50 + 3 + 1,
        "Northwind Hospital": 315 + 19 + 6,
        "Contoso Bank": 135 + 8 + 3,
    }
    assert UsageCharge.objects.aggregate(cents=Sum("amount_cents"), rows=Sum("rows")) == {
        "cents": 40,
        "rows": 30,
    }
    charged = AuditEvent.objects.filter(action="usage.charged").order_by("id")
    assert [event.details["amount_cents"] for event in charged] == [0, 30, 10]
    assert AuditEvent.objects.filter(action="usage.cap_reached").count() == 1
    assert_ledgers_balance()
    usage = buyer_api.get("/api/usage/").json()
    assert len(usage) == 1
    assert {key: usage[0][key] for key in ("month_rows", "month_charged_cents", "month_calls")} == {
        "month_rows": 30,
        "month_charged_cents": 40,
        "month_calls": 3,
    }
    assert (usage[0]["remaining_cap_rows"], usage[0]["trial_rows_left"]) == (0, 0)
    earnings = api_client_for(silo_user).get("/api/earnings/").json()
    assert (earnings["total_cents"], earnings["usage_total_cents"]) == (315 + 25, 25)
    assert (earnings["per_listing"][0]["usage_calls"], earnings["per_listing"][0]["sales"]) == (
        2,
        1,
    )
    fees = api_client_for(operator).get("/api/money/fees/").json()
    assert (fees["usage_calls"], fees["usage_revenue_cents"], fees["usage_fee_cents"]) == (3, 40, 4)
    assert fees["total_fee_cents"] == 50 + 4 == fees["balance_cents"]
    notices = Notification.objects.filter(organisation=buyer_user.organisation).order_by("id")
    assert [notice.kind for notice in notices] == ["usage_charged", "usage_cap_reached"]
    assert notices[1].message == (
        f"Your organisation predicted 30 rows of listing #{listing.id} this month, its plan's cap: "
        "further calls are refused until next month."
    )


@pytest.mark.django_db
def test_the_first_call_of_each_later_month_pays_that_months_fee_split_like_a_sale(
    usage_listing, buyer_user, buyer_api, top_up, adult_evaluation
):
    """The purchase paid its own month's fee; a month later the month's first call pays the 5.00 fee with its rows,
    the next call of that month does not, and the fee is split to the market and the silos like any charge."""
    from datetime import timedelta

    from django.utils import timezone

    listing, plan = usage_listing(trial_rows=0, monthly_cap_rows=None)
    top_up(buyer_user.organisation, 2000)
    bought = buy(buyer_api, listing, plan)
    predictor = token_client(bought["api_token"])
    raw, _, _ = adult_evaluation
    url = f"/api/global-models/{listing.global_model_id}/predict/"
    same_month = predictor.post(url, {"rows": raw_rows(raw.iloc[:5])}, format="json").json()[
        "usage"
    ]
    assert (same_month["amount_cents"], same_month["monthly_fee_cents"]) == (10, 0)

    # a month later: the purchase and its first call belong to the previous month
    earlier = timezone.now() - timedelta(days=32)
    Purchase.objects.filter(id=bought["id"]).update(created_at=earlier)
    UsageCharge.objects.update(period=earlier.date().replace(day=1))
    before = balances()
    first = predictor.post(url, {"rows": raw_rows(raw.iloc[:5])}, format="json").json()["usage"]
    second = predictor.post(url, {"rows": raw_rows(raw.iloc[:5])}, format="json").json()["usage"]

    assert (first["amount_cents"], first["monthly_fee_cents"]) == (500 + 10, 500)
    assert (second["amount_cents"], second["monthly_fee_cents"]) == (10, 0)
    after = balances()
    assert before["Fabrikam Insurance"] - after["Fabrikam Insurance"] == 520
    # 510 cents: 51 to the market, 459 split 70 / 30; then 10 cents: 1 and 9
    assert after["market"] - before["market"] == 51 + 1
    assert sum(after.values()) == sum(before.values())
    assert (
        AuditEvent.objects.filter(action="usage.charged")
        .order_by("-id")[1]
        .details["monthly_fee_cents"]
        == 500
    )
    assert_ledgers_balance()


@pytest.mark.django_db
def test_a_predictions_only_purchase_never_downloads_and_its_token_only_predicts(
    usage_listing, buyer_user, buyer_api, top_up
):
    listing, plan = usage_listing()
    top_up(buyer_user.organisation, 1000)
    bought = buy(buyer_api, listing, plan)
    link = buyer_api.post(
        f"/api/global-models/{listing.global_model_id}/download-links/",
        {"format": "onnx"},
        format="json",
    )
    assert link.status_code == 403
    assert link.json()["detail"].startswith(
        f"Your organisation bought predictions only for global model #{listing.global_model_id}: "
        "it cannot be downloaded."
    )
    scoped = token_client(bought["api_token"])
    assert scoped.get("/api/wallet/").status_code == 403
    assert (
        scoped.get("/api/wallet/").json()["detail"]
        == f"This token is scoped to predictions of global model #{listing.global_model_id}: it can "
        f"only call POST /api/global-models/{listing.global_model_id}/predict/."
    )
    assert not AuditEvent.objects.filter(action="model.download_link_created").exists()


@pytest.mark.django_db
def test_the_listing_limits_rows_per_call_and_the_card_api_states_them(
    usage_listing, buyer_user, buyer_api, top_up, adult_evaluation
):
    listing, plan = usage_listing(monthly_cap_rows=None)
    top_up(buyer_user.organisation, 1000)
    predictor = token_client(buy(buyer_api, listing, plan)["api_token"])
    raw, _, _ = adult_evaluation
    response = predictor.post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        {"rows": raw_rows(raw.iloc[:51])},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "This model answers at most 50 rows per call; you sent 51. Split the rows over several calls."
    )
    assert not UsageCharge.objects.exists()
    detail = buyer_api.get(f"/api/listings/{listing.id}/").json()
    assert (detail["access"], detail["max_rows_per_call"], detail["max_rows_per_day"]) == (
        "predictions",
        50,
        1000,
    )


@pytest.mark.django_db
def test_a_private_offer_is_hidden_from_every_other_buyer(
    usage_listing, buyer_user, operator, top_up
):
    from market.accounts.services import organisation_create, user_create

    listing, public_plan = usage_listing()
    private = plan_create(
        listing=listing,
        actor=operator,
        name="For Fabrikam",
        kind="usage",
        price_per_thousand_rows_cents=1000,
        private_organisation_id=buyer_user.organisation_id,
    )
    other = user_create(
        username="otto-other",
        password="other-password",
        organisation=organisation_create(name="Other Buyer", is_silo=False, is_buyer=True),
    )
    other_api = api_client_for(other)
    top_up(other.organisation, 1000)
    assert [plan["id"] for plan in other_api.get(f"/api/listings/{listing.id}/plans/").json()] == [
        public_plan.id
    ]
    refused = other_api.post(
        f"/api/listings/{listing.id}/purchase/", {"plan": private.id}, format="json"
    )
    assert refused.status_code == 404
    assert refused.json()["detail"] == f"Listing #{listing.id} has no pricing plan #{private.id}."
    assert not Purchase.objects.exists()
    assert [
        plan["id"]
        for plan in api_client_for(buyer_user).get(f"/api/listings/{listing.id}/plans/").json()
    ] == [public_plan.id, private.id]


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_never_pass_the_cap_and_are_charged_exactly_once(
    usage_listing, buyer_user, top_up, adult_evaluation
):
    listing, plan = usage_listing(trial_rows=0, monthly_cap_rows=12, monthly_fee_cents=0)
    top_up(buyer_user.organisation, 1000)
    buyer_api = api_client_for(buyer_user)
    key = buy(buyer_api, listing, plan)["api_token"]
    raw, _, _ = adult_evaluation
    url = f"/api/global-models/{listing.global_model_id}/predict/"
    rows = raw_rows(raw.iloc[:1])

    def call(number: int) -> int:
        # calls 0-3 send the same Idempotency-Key: charged once between them
        key_header = "same-call" if number < 4 else f"call-{number}"
        return (
            token_client(key)
            .post(url, {"rows": rows}, format="json", HTTP_IDEMPOTENCY_KEY=key_header)
            .status_code
        )

    statuses = run_at_once(call, list(range(20)))
    # 17 distinct calls of one row against a 12-row cap: 12 charged (the repeated key answered 200 four times).
    assert UsageCharge.objects.count() == 12
    assert statuses.count(200) == 12 + 3 and statuses.count(409) == 5
    assert UsageCharge.objects.aggregate(cents=Sum("amount_cents"))["cents"] == 12 * 2
    debits = WalletEntry.objects.filter(kind=WalletEntryKind.USAGE_DEBIT)
    assert debits.aggregate(cents=Sum("amount_cents"))["cents"] == -24
    assert balances()["Fabrikam Insurance"] == 1000 - 24
    assert AuditEvent.objects.filter(action="usage.charged").count() == 12
    assert_ledgers_balance()


@pytest.mark.parametrize(
    "calls, price, expected",
    [([1] * 20, 50, [1] + [0] * 19), ([999, 1, 1000], 7, [7, 0, 7]), ([3, 3, 3], 1000, [3, 3, 3])],
)
def test_a_months_usage_charges_add_up_to_its_rows_price_rounded_up_once(calls, price, expected):
    from market.commerce.usage import usage_cents

    charged, billed = [], 0
    for rows in calls:
        charged.append(
            usage_cents(billed_before=billed, billed=rows, price_per_thousand_rows_cents=price)
        )
        billed += rows
    assert charged == expected
    assert sum(charged) == -(-billed * price // 1000)


@pytest.mark.django_db
def test_usage_webhooks_reach_only_the_buying_organisation(
    usage_listing, buyer_user, buyer_api, top_up, adult_evaluation, silo_user
):
    from market.webhooks.models import WebhookEndpoint, WebhookEventType

    endpoints = {
        user.username: WebhookEndpoint.objects.create(
            organisation=user.organisation,
            url=f"https://hooks.example.org/{user.username}",
            events=WebhookEventType.values,
            secret="whsec_x",
        )
        for user in (buyer_user, silo_user)
    }
    listing, plan = usage_listing(monthly_cap_rows=12, trial_rows=0)
    top_up(buyer_user.organisation, 1000)
    predictor = token_client(buy(buyer_api, listing, plan)["api_token"])
    raw, _, _ = adult_evaluation
    response = predictor.post(
        f"/api/global-models/{listing.global_model_id}/predict/",
        {"rows": raw_rows(raw.iloc[:12])},
        format="json",
    )
    assert response.status_code == 200
    received = endpoints["fay-fabrikam"].deliveries.filter(event_type__startswith="usage.")
    received = received.order_by("id")
    assert [delivery.event_type for delivery in received] == ["usage.charged", "usage.cap_reached"]
    assert received[0].payload["usage"] | {"charge": 0} == {
        "charge": 0,
        "listing": listing.id,
        "global_model": listing.global_model_id,
        "rows": 12,
        "free_rows": 0,
        "amount_cents": 24,
        "monthly_fee_cents": 0,
        "month_rows": 12,
        "remaining_cap_rows": 0,
    }
    assert not endpoints["sam-silo"].deliveries.filter(event_type__startswith="usage.").exists()
