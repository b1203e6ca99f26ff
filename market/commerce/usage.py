"""Metered predictions of predictions-only purchases: the limits checked before a call, and its charge.

A call's rows first use the plan's trial (free rows once, or every row during the free days after the purchase);
the rest are billed at the plan's price per 1,000 rows. The purchase pays the plan's monthly fee for its own month;
the first call of each later month pays that month's fee with its rows (:func:`monthly_fee_due`). So that a month's calls add up to the cent, a call is
charged ``ceil(billed × price / 1000) − ceil(billed_before × price / 1000)`` cents, where ``billed_before`` is what
the month had billed before it: the month's total is the exact price of its rows, rounded up once.

A charge happens under row locks on every wallet it touches (the buyer's first among them, in id order), so the
buyer's calls are charged one at a time; the monthly cap, the daily limit, the balance and an Idempotency-Key's
earlier use are read under those locks. The charge, the buyer's debit, the market's fee and the silos' shares
(split as a sale is, market.commerce.purchases) are written in one transaction, with the audit entry.
"""

import math
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from market.accounts.models import User
from market.audit.services import audit_record
from market.commerce.models import Entitlement, ListingAccess, WalletEntryKind
from market.commerce.plan_models import PlanKind, PricingPlan, UsageCharge
from market.commerce.purchases import sale_split, sale_wallet_ids, split_entries_append
from market.commerce.wallets import wallet_entry_append, wallets_locked
from market.errors import Conflict, IdempotencyKeyReused, InvalidInput, RateLimited
from market.rate_limit import Rate, rates_take


@dataclass(frozen=True)
class UsageOutcome:
    charge: UsageCharge
    replayed: bool  # an earlier call with the same Idempotency-Key was charged; this one was not
    month_rows: int  # rows predicted this month, this call included
    remaining_cap_rows: int | None  # None: the plan has no cap


def usage_replay(
    *, entitlement: Entitlement, idempotency_key: str | None, rows: int
) -> UsageCharge | None:
    """The earlier charge of this Idempotency-Key, if any; a key reused for other rows is a 422."""
    if idempotency_key is None:
        return None
    if not 1 <= len(idempotency_key) <= 200:
        raise InvalidInput("The Idempotency-Key header must be 1 to 200 characters long.")
    earlier = UsageCharge.objects.filter(
        organisation_id=entitlement.organisation_id, idempotency_key=idempotency_key
    ).first()
    if earlier is not None and (earlier.entitlement_id != entitlement.id or earlier.rows != rows):
        raise IdempotencyKeyReused(
            f"The Idempotency-Key {idempotency_key!r} was already used for a call of {earlier.rows} rows "
            f"to global model #{earlier.entitlement.global_model_id}; send a new key for a new call."
        )
    return earlier


def usage_limits_check(*, entitlement: Entitlement, rows: int) -> None:
    """The listing's limits on one call, before the model runs: rows per call, calls per minute (per buyer
    organisation), and (read again under lock when charged) rows per day and the plan's monthly cap."""
    listing = entitlement.purchase.listing
    if listing.max_rows_per_call is not None and rows > listing.max_rows_per_call:
        raise InvalidInput(
            f"This model answers at most {listing.max_rows_per_call} rows per call; you sent {rows}. "
            "Split the rows over several calls."
        )
    _usage_totals_check(entitlement=entitlement, rows=rows, now=timezone.now())
    if listing.max_calls_per_minute is not None:
        rate = Rate(
            key=f"predict-listing-{listing.id}-organisation-{entitlement.organisation_id}",
            count=listing.max_calls_per_minute,
            period_seconds=60,
        )
        wait = rates_take(cache=cache, rates=[rate], now=time.time())
        if wait > 0:
            raise RateLimited(
                f"This model answers your organisation at most {listing.max_calls_per_minute} calls per "
                f"minute; try again in {math.ceil(wait)} seconds.",
                retry_after=math.ceil(wait),
            )


def _month_start(now: datetime) -> date:
    return now.date().replace(day=1)


def _totals(entitlement: Entitlement, now: datetime) -> dict:
    charges = UsageCharge.objects.filter(entitlement=entitlement)
    month = charges.filter(period=_month_start(now)).aggregate(
        month_rows=Sum("rows"),
        month_billed=Sum(F("rows") - F("free_rows")),
        month_calls=Count("id"),
    )
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    day = charges.filter(created_at__gte=day_start).aggregate(day_rows=Sum("rows"))
    used = charges.aggregate(free_rows_used=Sum("free_rows"))
    return {name: value or 0 for name, value in {**month, **day, **used}.items()}


def _usage_totals_check(*, entitlement: Entitlement, rows: int, now: datetime) -> dict:
    totals = _totals(entitlement, now)
    listing, plan = entitlement.purchase.listing, entitlement.purchase.plan
    if (
        listing.max_rows_per_day is not None
        and totals["day_rows"] + rows > listing.max_rows_per_day
    ):
        left = max(listing.max_rows_per_day - totals["day_rows"], 0)
        raise Conflict(
            f"This model answers your organisation at most {listing.max_rows_per_day} rows per day; "
            f"{left} are left today and this call has {rows}. Try again tomorrow (UTC)."
        )
    cap = plan.monthly_cap_rows if plan is not None else None
    if cap is not None and totals["month_rows"] + rows > cap:
        left = max(cap - totals["month_rows"], 0)
        raise Conflict(
            f"Your plan's monthly cap is {cap} rows: {totals['month_rows']} are used this month and "
            f"{left} are left, fewer than this call's {rows}. Nothing was charged; send at most {left} "
            "rows, or wait for next month."
        )
    return totals


def free_rows_of(
    *, plan: PricingPlan | None, bought_at: datetime, now: datetime, free_rows_used: int, rows: int
) -> int:
    """How many of a call's ``rows`` the trial covers: all of them during the free days, else what is left of
    the free rows."""
    if plan is None or plan.kind != PlanKind.USAGE:
        return rows  # a flat price or the listing's own price paid for every call
    if plan.trial_days and now < bought_at + timedelta(days=plan.trial_days):
        return rows
    return min(rows, max(plan.trial_rows - free_rows_used, 0))


def monthly_fee_due(
    *, plan: PricingPlan | None, bought_at: datetime, now: datetime, month_calls: int
) -> int:
    """The plan's monthly fee when this call is the first of a month after the month of purchase (the purchase
    paid its own month's), else 0."""
    if plan is None or plan.kind != PlanKind.USAGE or month_calls:
        return 0
    return plan.monthly_fee_cents if _month_start(now) > _month_start(bought_at) else 0


def usage_cents(*, billed_before: int, billed: int, price_per_thousand_rows_cents: int) -> int:
    """Cents for ``billed`` more rows of a month that had billed ``billed_before`` (module docstring)."""

    def cents_up_to(rows: int) -> int:  # ceil(rows × price / 1000) in integers
        return -(-rows * price_per_thousand_rows_cents // 1000)

    return cents_up_to(billed_before + billed) - cents_up_to(billed_before)


def usage_charge(
    *,
    entitlement: Entitlement,
    user: User,
    rows: int,
    idempotency_key: str | None = None,
    request=None,
) -> UsageOutcome:
    """Meter and charge one prediction call of ``rows`` rows (module docstring), exactly once per key."""
    purchase = entitlement.purchase
    listing = purchase.listing
    wallet_ids = sale_wallet_ids(listing=listing, buyer=entitlement.organisation)
    with transaction.atomic():
        wallets = wallets_locked(
            {wallet_ids["buyer"], wallet_ids["market"], *wallet_ids["silos"].values()}
        )
        earlier = usage_replay(entitlement=entitlement, idempotency_key=idempotency_key, rows=rows)
        now = timezone.now()
        if earlier is not None:
            return _outcome(entitlement, earlier, now=now, replayed=True)
        totals = _usage_totals_check(entitlement=entitlement, rows=rows, now=now)
        plan = purchase.plan
        free_rows = free_rows_of(
            plan=plan,
            bought_at=purchase.created_at,
            now=now,
            free_rows_used=totals["free_rows_used"],
            rows=rows,
        )
        monthly_fee_cents = monthly_fee_due(
            plan=plan, bought_at=purchase.created_at, now=now, month_calls=totals["month_calls"]
        )
        amount_cents = monthly_fee_cents + usage_cents(
            billed_before=totals["month_billed"],
            billed=rows - free_rows,
            price_per_thousand_rows_cents=plan.price_per_thousand_rows_cents if plan else 0,
        )
        balance_cents = wallets[wallet_ids["buyer"]].balance_cents
        if amount_cents > balance_cents:
            with_fee = (
                f" (with this month's fee of {monthly_fee_cents} cents)"
                if monthly_fee_cents
                else ""
            )
            raise Conflict(
                f"This call of {rows} rows costs {amount_cents} cents{with_fee} but your wallet holds "
                f"{balance_cents}; top up at least {amount_cents - balance_cents} cents. Nothing was charged."
            )
        split = sale_split(listing=listing, amount_cents=amount_cents)
        charge = UsageCharge.objects.create(
            entitlement=entitlement,
            purchase=purchase,
            organisation_id=entitlement.organisation_id,
            user=user,
            rows=rows,
            free_rows=free_rows,
            amount_cents=amount_cents,
            fee_cents=split.fee_cents,
            monthly_fee_cents=monthly_fee_cents,
            period=_month_start(now),
            idempotency_key=idempotency_key or "",
        )
        if amount_cents > 0:
            wallet_entry_append(
                wallet=wallets[wallet_ids["buyer"]],
                kind=WalletEntryKind.USAGE_DEBIT,
                amount_cents=-amount_cents,
                purchase=purchase,
                usage_charge=charge,
                actor=user,
            )
        split_entries_append(
            split=split,
            wallets=wallets,
            wallet_ids=wallet_ids,
            purchase=purchase,
            usage_charge=charge,
        )
        outcome = _outcome(entitlement, charge, now=now, replayed=False)
        _usage_audit(outcome=outcome, user=user, listing_id=listing.id, request=request)
    return outcome


def _outcome(
    entitlement: Entitlement, charge: UsageCharge, *, now: datetime, replayed: bool
) -> UsageOutcome:
    month_rows = _totals(entitlement, now)["month_rows"]
    plan = entitlement.purchase.plan
    cap = plan.monthly_cap_rows if plan is not None else None
    return UsageOutcome(
        charge=charge,
        replayed=replayed,
        month_rows=month_rows,
        remaining_cap_rows=None if cap is None else max(cap - month_rows, 0),
    )


def _usage_audit(*, outcome: UsageOutcome, user: User, listing_id: int, request) -> None:
    charge = outcome.charge
    details = {
        "listing": listing_id,
        "global_model": charge.entitlement.global_model_id,
        "purchase": charge.purchase_id,
        "rows": charge.rows,
        "free_rows": charge.free_rows,
        "amount_cents": charge.amount_cents,
        "monthly_fee_cents": charge.monthly_fee_cents,
        "fee_cents": charge.fee_cents,
        "month_rows": outcome.month_rows,
        "remaining_cap_rows": outcome.remaining_cap_rows,
    }
    audit_record(
        action="usage.charged", actor=user, target=charge, request=request, details=details
    )
    if outcome.remaining_cap_rows == 0:
        audit_record(
            action="usage.cap_reached", actor=user, target=charge, request=request, details=details
        )


def usage_summaries(*, user: User) -> list[dict]:
    """The user's organisation's predictions-only purchases with this month's use: rows, what was charged, the
    trial left and the cap left (operators: every organisation's)."""
    entitlements = Entitlement.objects.filter(access=ListingAccess.PREDICTIONS).select_related(
        "purchase__listing", "purchase__plan", "organisation"
    )
    if not user.is_operator:
        entitlements = entitlements.filter(organisation_id=user.organisation_id or 0)
    now = timezone.now()
    return [_usage_summary(entitlement, now) for entitlement in entitlements.order_by("id")]


def _usage_summary(entitlement: Entitlement, now: datetime) -> dict:
    totals = _totals(entitlement, now)
    purchase, plan = entitlement.purchase, entitlement.purchase.plan
    month = UsageCharge.objects.filter(entitlement=entitlement, period=_month_start(now))
    cap = plan.monthly_cap_rows if plan is not None else None
    trial_ends = (
        purchase.created_at + timedelta(days=plan.trial_days)
        if plan is not None and plan.trial_days
        else None
    )
    return {
        "purchase": purchase.id,
        "organisation": entitlement.organisation_id,
        "listing": purchase.listing_id,
        "listing_name": purchase.listing.name,
        "global_model": entitlement.global_model_id,
        "plan": plan.id if plan is not None else None,
        "period": _month_start(now),
        "month_rows": totals["month_rows"],
        "month_calls": month.count(),
        "month_charged_cents": month.aggregate(cents=Sum("amount_cents"))["cents"] or 0,
        "day_rows": totals["day_rows"],
        "monthly_cap_rows": cap,
        "remaining_cap_rows": None if cap is None else max(cap - totals["month_rows"], 0),
        "trial_rows_left": max(plan.trial_rows - totals["free_rows_used"], 0)
        if plan is not None
        else 0,
        "trial_ends_at": trial_ends,
    }
