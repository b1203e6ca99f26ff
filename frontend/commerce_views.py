"""Market pages: catalog, model card, buying with a confirmation, purchases with downloads, wallet, earnings.

They call the same selectors and services as the REST API (market.commerce).
"""

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from frontend.sent_once import FORM_KEY_FIELD, sent_once
from frontend.value_plot import contribution_value_bars
from market.commerce.cards import model_card
from market.commerce.delivery import RAW_ONNX, download_link_create
from market.commerce.models import ListingStatus
from market.commerce.money import payouts_of
from market.commerce.packages import download_choices, usage_snippet
from market.commerce.payouts import payable_cents
from market.commerce.plans import plan_upfront_cents, plans_visible
from market.commerce.purchases import purchase_create
from market.commerce.selectors import (
    catalog_filters_from,
    catalog_listings,
    credit_requests_of,
    earnings_for,
    earnings_organisation,
    entitlement_exists,
    listing_get,
    purchase_list_with_files,
    wallet_for,
)
from market.commerce.services import PublishGateRefused, listing_publish, listing_retire
from market.errors import InvalidInput
from market.federations.models import PrivacyLevel
from market.federations.selectors import federation_names
from market.jobs.quality import catalog_flags
from market.jobs.selectors import global_model_families
from market.jobs.visibility import (
    global_model_view,
    named_contribution_values,
    named_value_copies,
    own_contribution_values,
)

PAGE_SIZE = 20


CREDIT_PRICE_FIELDS = {"min_credits": "min_price", "max_credits": "max_price"}


def _catalog_params(query) -> dict:
    """The page's price filter is in credits with cents, as prices are shown ("max 30" means 30.00 credits); the
    selector's (and the API's) is in cents."""
    params = {name: query.get(name) for name in query}
    for credits_name, cents_name in CREDIT_PRICE_FIELDS.items():
        text = (params.pop(credits_name, None) or "").strip()
        if not text:
            continue
        try:
            credits = Decimal(text)
        except InvalidOperation:
            raise InvalidInput(
                f"The price filter must be an amount of credits such as 12.50, not '{text[:40]}'.",
                field=credits_name,
            ) from None
        if not credits.is_finite() or credits < 0 or credits != credits.quantize(Decimal("0.01")):
            raise InvalidInput(
                f"The price filter must be a non-negative amount of credits with at most two decimals "
                f"(cents), not '{text[:40]}'.",
                field=credits_name,
            )
        params[cents_name] = str(int(credits * 100))
    params.pop(
        "min_accuracy", None
    )  # the page's accuracy filter is the percentage below, as cards show it
    percent = (params.pop("min_accuracy_percent", None) or "").strip()
    if percent:
        try:
            fraction = Decimal(percent) / 100
        except InvalidOperation:
            raise InvalidInput(
                f"The accuracy filter must be a percentage such as 75, not '{percent[:40]}'.",
                field="min_accuracy_percent",
            ) from None
        if not fraction.is_finite() or not 0 <= fraction <= 1:
            raise InvalidInput(
                f"The accuracy filter must be a percentage from 0 to 100, not '{percent[:40]}'.",
                field="min_accuracy_percent",
            )
        params["min_accuracy"] = str(fraction)
    return params


@require_GET
@page
def catalog_page(request):
    filters = catalog_filters_from(_catalog_params(request.GET))
    listings = Paginator(
        catalog_listings(user=request.user, filters=filters),
        PAGE_SIZE,
    ).get_page(request.GET.get("page"))
    # a model below a free baseline or the best silo is flagged in the list too
    for listing in listings:
        listing.quality_flags = catalog_flags(listing.global_model)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "frontend/commerce/catalog.html",
        {
            "section": "market",
            "listings": listings,
            "filters": filters,
            "filter_query": query.urlencode(),
            "federations": federation_names(),
            "model_families": global_model_families(),
            "privacy_levels": PrivacyLevel.choices,
            "statuses": ListingStatus.choices,
        },
    )


def _balance_cents(request) -> int | None:
    if request.user.organisation_id is None:
        return None
    return wallet_for(user=request.user)[1]


def _operator_values(request, listing) -> tuple[list[dict], list[list[str]]]:
    """Every silo's contribution value and the copies valued as one player, for the card's operator-only section;
    nothing for anyone else (a card is public: buyers see nothing per silo, a silo reads its own value on its
    earnings page)."""
    if not request.user.is_authenticated or not request.user.is_operator:
        return [], []
    view = global_model_view(global_model=listing.global_model, user=request.user)
    return named_contribution_values(view), named_value_copies(view)


def _before_purchase(global_model) -> dict:
    """What a buyer reads before paying: every format it could download (size, SHA-256) and, where the model
    has a raw-column ONNX, the snippet that runs it, as the model's page after purchase shows it."""
    downloads = download_choices(global_model)
    has_raw_onnx = any(choice.format == RAW_ONNX for choice in downloads)
    return {
        "downloads": downloads,
        "snippet": usage_snippet(global_model) if has_raw_onnx else "",
    }


def _listing_page(request, listing, *, refusal: str = "", status: int = 200):
    values, copies = _operator_values(request, listing)
    return render(
        request,
        "frontend/commerce/listing.html",
        {
            "section": "market",
            "listing": listing,
            "card": model_card(listing),
            **_before_purchase(listing.global_model),
            "plans": plans_visible(listing=listing, user=request.user),
            "refusal": refusal,
            "owned": entitlement_exists(user=request.user, global_model=listing.global_model),
            "contribution_values": values,
            "value_plot": contribution_value_bars(values) if values else None,
            "value_copies": copies,
        },
        status=status,
    )


@require_GET
@page
def listing_page(request, listing_id):
    return _listing_page(request, listing_get(listing_id=listing_id, user=request.user))


@require_GET
@page
def purchase_confirm_page(request, listing_id):
    listing = listing_get(listing_id=listing_id, user=request.user)
    balance = _balance_cents(request)
    plans = list(plans_visible(listing=listing, user=request.user))
    upfront = min((plan_upfront_cents(plan) for plan in plans), default=listing.price_cents)
    return render(
        request,
        "frontend/commerce/confirm.html",
        {
            "section": "market",
            "listing": listing,
            "plans": plans,
            "price_cents": upfront,
            "balance_cents": balance,
            "balance_after_cents": None if balance is None else balance - upfront,
            "owned": entitlement_exists(user=request.user, global_model=listing.global_model),
        },
    )


@require_POST
@page
@sent_once
def purchase_action(request, listing_id):
    listing = listing_get(listing_id=listing_id, user=request.user)
    plan_id = request.POST.get("plan", "")
    result = purchase_create(
        listing=listing,
        user=request.user,
        idempotency_key=request.POST.get(FORM_KEY_FIELD) or None,  # the API's replay too
        plan_id=int(plan_id) if plan_id.isdigit() else None,
        request=request,
    )
    if result.api_token_key is not None:  # shown once, on this page, never stored
        return render(
            request,
            "frontend/commerce/prediction_token.html",
            {"section": "purchases", "listing": listing, "token": result.api_token_key},
        )
    if not result.replayed:
        messages.success(request, f"You bought {listing.name}. Download it below.")
    return redirect(f"{reverse('commerce-purchases')}#purchase-{result.purchase.id}")


@require_POST
@page
@sent_once
def listing_state_action(request, listing_id, action):
    listing = listing_get(listing_id=listing_id, user=request.user)
    if action == "publish":
        try:
            listing = listing_publish(
                listing=listing,
                actor=request.user,
                request=request,
                override_reason=request.POST.get("override_reason", ""),
            )
        except (
            PublishGateRefused
        ) as refusal:  # the card again, with the sentence and the override form
            return _listing_page(request, listing, refusal=str(refusal), status=refusal.status_code)
    else:
        listing = listing_retire(listing=listing, actor=request.user, request=request)
    messages.success(request, f"{listing.name} is now {listing.get_status_display().lower()}.")
    return redirect("commerce-listing", listing_id=listing.id)


@require_GET
@page
def purchases_page(request):
    purchases = Paginator(purchase_list_with_files(user=request.user), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "frontend/commerce/purchases.html",
        {"section": "purchases", "purchases": purchases},
    )


@require_POST
@page
def download_action(request, global_model_id):
    """A fresh signed link, followed at once: the browser downloads the file."""
    link = download_link_create(
        user=request.user,
        global_model_id=global_model_id,
        file_format=request.POST.get("format", ""),
        request=request,
    )
    return redirect("api-download", token=link.token)


@require_GET
@page
def wallet_page(request):
    organisation, balance, entries = wallet_for(user=request.user)
    return render(
        request,
        "frontend/commerce/wallet.html",
        {
            "section": "wallet",
            "organisation": organisation,
            "balance_cents": balance,
            "credit_requests": credit_requests_of(organisation=organisation)[:10],
            "entries": Paginator(entries, 50).get_page(request.GET.get("page")),
        },
    )


@require_GET
@page
def earnings_page(request):
    organisation = earnings_organisation(user=request.user)
    return render(
        request,
        "frontend/commerce/earnings.html",
        {
            "section": "earnings",
            "organisation": organisation,
            "earnings": earnings_for(organisation=organisation),
            "contribution_values": own_contribution_values(organisation_id=organisation.id),
            "payouts": payouts_of(organisation=organisation),
            "payable_cents": payable_cents(organisation=organisation),
        },
    )
