"""The operator's money page: the market's fees (total and per sale), every organisation's wallet (searchable,
paged) and one organisation's ledger with the form that records a payout made outside the app.

The reads are market.commerce.money's, the payout is market.commerce.payouts' (the API calls the same)."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from frontend.decorators import page
from frontend.form_refusals import form_refused
from frontend.operator_views import credits_to_cents
from frontend.sent_once import sent_once
from market.accounts.models import Organisation
from market.commerce.models import WalletEntryKind
from market.commerce.money import (
    ledger_entries,
    market_fees,
    organisations_with_money,
    sales_with_fees,
)
from market.commerce.payouts import payable_cents, payout_record
from market.commerce.selectors import organisation_get
from market.commerce.services import require_operator
from market.errors import DomainError

ORGANISATIONS_PER_PAGE = 20
SALES_PER_PAGE = 20
ENTRIES_PER_PAGE = 50


@require_GET
@page
def money_page(request):
    search = request.GET.get("search", "")[:200]
    context = {
        "section": "money",
        "fees": market_fees(user=request.user),
        "sales": Paginator(sales_with_fees(user=request.user), SALES_PER_PAGE).get_page(
            request.GET.get("sales_page")
        ),
        "organisations": Paginator(
            organisations_with_money(user=request.user, search=search), ORGANISATIONS_PER_PAGE
        ).get_page(request.GET.get("page")),
        "search": search,
    }
    return render(request, "frontend/operator/money.html", context)


def _ledger_context(request, organisation: Organisation) -> dict:
    kind, search = request.GET.get("kind", ""), request.GET.get("search", "")[:200]
    entries = ledger_entries(user=request.user, organisation=organisation, kind=kind, search=search)
    return {
        "section": "money",
        "organisation": organisation,
        "balance_cents": getattr(getattr(organisation, "wallet", None), "balance_cents", 0),
        "payable_cents": payable_cents(organisation=organisation),
        "entries": Paginator(entries, ENTRIES_PER_PAGE).get_page(request.GET.get("page")),
        "kinds": WalletEntryKind.choices,
        "kind": kind,
        "search": search,
        "form": request.POST,
    }


@require_http_methods(["GET", "POST"])
@page
@sent_once
def organisation_ledger_page(request, organisation_id):
    """One organisation's ledger (filtered by kind, searched by reference, note or listing) and, for a silo with
    earnings not yet paid, the payout form."""
    require_operator(request.user, "read the market's money")
    organisation = organisation_get(organisation_id=organisation_id)
    if request.method == "GET":
        return render(
            request, "frontend/operator/ledger.html", _ledger_context(request, organisation)
        )
    try:
        amount_cents = credits_to_cents(request.POST.get("amount", ""), field="The amount")
        _, created = payout_record(
            organisation=organisation,
            amount_cents=amount_cents,
            reference=request.POST.get("reference", ""),
            note=request.POST.get("note", ""),
            actor=request.user,
            request=request,
        )
    except DomainError as error:
        return render(
            request,
            "frontend/operator/ledger.html",
            _ledger_context(request, organisation),
            status=form_refused(request, error),
        )
    messages.success(
        request,
        f"Payout of {amount_cents / 100:.2f} credits to {organisation.name} recorded."
        if created
        else "That payment reference was already recorded; nothing changed.",
    )
    return redirect("money-ledger", organisation_id=organisation.id)
