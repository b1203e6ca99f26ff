"""Pricing plans: an operator adds plans to a listing (flat, or usage-based with a trial and a cap; public, or a
private offer to one organisation); a buyer sees the plans meant for it and buys one (market.commerce.purchases).

A private offer is hidden from everyone but its organisation and the operators: to anyone else it does not exist
(a 404 like a plan that was never made), in pages and the API alike.
"""

from django.db import transaction
from django.db.models import Q, QuerySet

from market.accounts.models import Organisation, User
from market.audit.services import audit_record
from market.commerce.models import Listing, ListingStatus
from market.commerce.plan_models import PlanKind, PricingPlan
from market.commerce.services import MAX_PRICE_CENTS, require_operator
from market.errors import InvalidInput, NotFound

#: The most rows a trial or a monthly cap may name: far above any real use, far below the BIGINT columns.
MAX_PLAN_ROWS = 10**12


def plans_visible(*, listing: Listing, user: User) -> QuerySet[PricingPlan]:
    """The listing's plans the user may see: every public plan, and private offers to the user's organisation
    (operators: all)."""
    plans = PricingPlan.objects.filter(listing=listing).select_related("private_organisation")
    if user.is_operator:
        return plans
    return plans.filter(
        Q(private_organisation__isnull=True) | Q(private_organisation_id=user.organisation_id)
    )


def plan_upfront_cents(plan: PricingPlan) -> int:
    """What buying the plan costs at once: the flat price, or a usage plan's first monthly fee."""
    return plan.flat_price_cents if plan.kind == PlanKind.FLAT else plan.monthly_fee_cents


def plan_for_purchase(
    *, listing: Listing, buyer: Organisation, plan_id: int | None
) -> PricingPlan | None:
    """The plan the buyer chose; a listing with plans the buyer can see needs one chosen, a listing without plans
    sells at its own flat price (None)."""
    visible = PricingPlan.objects.filter(listing=listing).filter(
        Q(private_organisation__isnull=True) | Q(private_organisation=buyer)
    )
    if plan_id is None:
        choices = list(visible.values_list("id", flat=True))
        if choices:
            raise InvalidInput(
                'Choose a pricing plan: send {"plan": id} with one of '
                + ", ".join(f"#{choice}" for choice in choices)
                + "."
            )
        return None
    plan = visible.filter(pk=plan_id).first()
    if plan is None:
        raise NotFound(f"Listing #{listing.id} has no pricing plan #{plan_id}.")
    return plan


def _check_rows(value: int | None, what: str) -> None:
    if value is not None and not 0 <= value <= MAX_PLAN_ROWS:
        raise InvalidInput(f"The {what} must be between 0 and {MAX_PLAN_ROWS} rows, not {value}.")


def _check_plan_terms(
    *,
    kind: str,
    name: str,
    cents: dict[str, int],
    monthly_cap_rows: int | None,
    trial_rows: int,
    trial_days: int,
) -> None:
    if kind not in PlanKind.values:
        raise InvalidInput(f"A plan's kind is one of {', '.join(PlanKind.values)}, not {kind!r}.")
    if not name.strip():
        raise InvalidInput("Give the plan a name buyers recognise, e.g. 'Pay per use'.")
    for field, value in cents.items():
        if not 0 <= value <= MAX_PRICE_CENTS:
            raise InvalidInput(f"{field} must be between 0 and {MAX_PRICE_CENTS}, not {value}.")
    if kind == PlanKind.FLAT and (cents["monthly_fee_cents"] or monthly_cap_rows is not None):
        raise InvalidInput(
            "A flat plan has no monthly fee or cap; make it a usage plan to charge per use."
        )
    _check_rows(monthly_cap_rows, "monthly cap")
    _check_rows(trial_rows, "trial")
    if not 0 <= trial_days <= 366:
        raise InvalidInput(f"A trial lasts 0 to 366 days, not {trial_days}.")


def plan_create(
    *,
    listing: Listing,
    actor: User,
    name: str,
    kind: str,
    flat_price_cents: int = 0,
    monthly_fee_cents: int = 0,
    price_per_thousand_rows_cents: int = 0,
    monthly_cap_rows: int | None = None,
    trial_rows: int = 0,
    trial_days: int = 0,
    private_organisation_id: int | None = None,
    request=None,
) -> PricingPlan:
    """Add a plan to a draft or published listing (a retired listing sells nothing); plans never change."""
    require_operator(actor, "add pricing plans")
    if listing.status == ListingStatus.RETIRED:
        raise InvalidInput(f"Listing #{listing.id} is retired and sells nothing; add no plans.")
    cents = {
        "flat_price_cents": flat_price_cents,
        "monthly_fee_cents": monthly_fee_cents,
        "price_per_thousand_rows_cents": price_per_thousand_rows_cents,
    }
    _check_plan_terms(
        kind=kind,
        name=name,
        cents=cents,
        monthly_cap_rows=monthly_cap_rows,
        trial_rows=trial_rows,
        trial_days=trial_days,
    )
    private_organisation = None
    if private_organisation_id is not None:
        private_organisation = Organisation.objects.filter(pk=private_organisation_id).first()
        if private_organisation is None:
            raise InvalidInput(f"There is no organisation #{private_organisation_id} to offer to.")
    with transaction.atomic():
        plan = PricingPlan.objects.create(
            listing=listing,
            name=name.strip()[:200],
            kind=kind,
            monthly_cap_rows=monthly_cap_rows,
            trial_rows=trial_rows,
            trial_days=trial_days,
            private_organisation=private_organisation,
            created_by=actor,
            **cents,
        )
        audit_record(
            action="plan.created",
            actor=actor,
            target=plan,
            request=request,
            details={"listing": listing.id, "kind": kind, "private": private_organisation_id},
        )
    return plan
