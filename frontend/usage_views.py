"""Pages of selling access: the buyer's metered use (each predictions-only purchase's rows and charges this month,
with the trial and the monthly cap left; it reads the selector the usage API reads, market.commerce.usage), and
an operator's form adding a pricing plan to a listing (market.commerce.plans)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from frontend.operator_views import credits_to_cents
from frontend.sent_once import sent_once
from market.commerce.plans import plan_create
from market.commerce.selectors import listing_get
from market.commerce.services import require_operator
from market.commerce.usage import usage_summaries
from market.errors import InvalidInput


@require_GET
@page
def usage_page(request):
    return render(
        request,
        "frontend/commerce/usage.html",
        {"section": "purchases", "usage": usage_summaries(user=request.user)},
    )


def _whole_number(form, name: str, *, optional: bool = False) -> int | None:
    text = (form.get(name) or "").strip()
    if not text:
        return None if optional else 0
    if not text.isdigit():
        raise InvalidInput(
            f"{name.replace('_', ' ').capitalize()} must be a whole number, not {text!r}."
        )
    return int(text)


@require_POST
@page
@sent_once
def plan_create_action(request, listing_id):
    """Operators: add a pricing plan from the listing page; amounts are typed in credits."""
    listing = listing_get(listing_id=listing_id, user=request.user)
    require_operator(request.user, "add pricing plans")
    form = request.POST
    plan = plan_create(
        listing=listing,
        actor=request.user,
        name=form.get("name", ""),
        kind=form.get("kind", ""),
        flat_price_cents=credits_to_cents(form.get("flat_price") or "0", field="The flat price"),
        monthly_fee_cents=credits_to_cents(form.get("monthly_fee") or "0", field="The monthly fee"),
        price_per_thousand_rows_cents=credits_to_cents(
            form.get("price_per_thousand_rows") or "0", field="The price per 1,000 rows"
        ),
        monthly_cap_rows=_whole_number(form, "monthly_cap_rows", optional=True),
        trial_rows=_whole_number(form, "trial_rows") or 0,
        trial_days=_whole_number(form, "trial_days") or 0,
        private_organisation_id=_whole_number(form, "private_organisation", optional=True),
        request=request,
    )
    messages.success(request, f"Plan {plan.name!r} added to {listing.name}.")
    return redirect("commerce-listing", listing_id=listing.id)
