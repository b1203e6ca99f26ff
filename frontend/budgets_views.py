"""Privacy budget pages: the dashboard per federation (chart, timeline, limits, pricing, refusals) and the ledger.

Operators see every silo; a member silo sees its own budget only. The pages call the budget selectors and
services the REST API calls; the CSV export is the API's (``?format=csv``), linked with the page's filters.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from frontend.budget_charts import budget_overview, budget_strip, budgets_ranked, job_timeline
from frontend.decorators import page
from frontend.form_refusals import form_refused
from frontend.sent_once import sent_once
from frontend.templatetags.number_tags import epsilon
from market.budgets.models import EntryKind
from market.budgets.selectors import (
    WARNING_FRACTION,
    budget_get,
    budget_ledger,
    budget_list,
    budget_refusals,
    budget_summary,
    entry_summary,
)
from market.budgets.services import budget_limit_set
from market.errors import DomainError, InvalidInput, PermissionDenied
from market.federations.selectors import (
    federation_get,
    federation_list,
    federation_require_member,
    federations_joined,
)
from market.jobs.parameters import job_kind_priced_default
from market.jobs.pricing import job_price_calibration, job_price_quote

LEDGER_PER_PAGE = 50
BUDGETS_PER_PAGE = 10  # with the strip chart above, 200 silos stay within two screen heights
WARNINGS_LISTED = 5
STRIP_MINIMUM_SLOTS = 24  # a few silos get bars of a sensible width, not one bar across the chart
PRICE_FIELDS = ("mechanism", "noise", "delta", "n_queries", "partitions")


@require_GET
@page
def budget_index_page(request):
    """The federations whose budgets the user may see: all for operators, memberships for silos."""
    federations = (
        federation_list(user=request.user)
        if request.user.is_operator
        else federations_joined(user=request.user)
    )
    return render(
        request, "frontend/budgets/index.html", {"section": "budgets", "federations": federations}
    )


def _dashboard_context(request, federation, **extra) -> dict:
    """The dashboard of any number of silos: a summary line, a strip of every silo's bar in percent of its limit,
    one table page of silos (fullest first, searchable), one timeline point per job."""
    ranked = budgets_ranked(budget_list(federation=federation, user=request.user))
    search = request.GET.get("search", "").strip()[:200]
    shown = [
        budget for budget in ranked if search.casefold() in budget.organisation.name.casefold()
    ]
    page_of_budgets = Paginator(shown, BUDGETS_PER_PAGE).get_page(request.GET.get("page"))
    budgets = [budget_summary(budget) for budget in page_of_budgets]
    units = {budget["unit"] for budget in budgets}
    editing = request.GET.get("edit", "")
    entries = budget_ledger(federation=federation, user=request.user).order_by("created_at", "id")
    return {
        "section": "budgets",
        "federation": federation,
        "budgets": budgets,
        # one unit on the whole page is named in the column's heading, several beside each spend
        "common_unit": units.pop() if len(units) == 1 else None,
        "page_of_budgets": page_of_budgets,
        "search": search,
        "overview": budget_overview(ranked),
        "strip": budget_strip(ranked),
        "strip_width": max(len(ranked), STRIP_MINIMUM_SLOTS),
        "editing": next((budget for budget in budgets if str(budget["id"]) == editing), None),
        "timeline": job_timeline(entries),
        "warnings": [b for b in ranked if b.used_fraction >= WARNING_FRACTION][:WARNINGS_LISTED],
        "refusals": budget_refusals(federation=federation, user=request.user)[:10],
        "price_form": {
            "mechanism": "laplace",
            "noise": "0.04",
            "delta": "0.00001",
            "n_queries": "100",
            "partitions": "2",
        },
        **extra,
    }


@require_GET
@page
def budget_dashboard_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    federation_require_member(federation=federation, user=request.user)
    return render(
        request, "frontend/budgets/dashboard.html", _dashboard_context(request, federation)
    )


@require_POST
@page
@sent_once
def budget_limit_action(request, slug, budget_id):
    federation = federation_get(slug=slug, user=request.user)
    budget = budget_get(budget_id=budget_id, user=request.user)
    try:
        budget = budget_limit_set(
            budget_id=budget.id,
            epsilon_limit=request.POST.get("epsilon_limit", "").strip(),
            reason=request.POST.get("reason", "").strip()[:1000],
            actor=request.user,
            request=request,
        )
    except PermissionDenied:
        raise  # answered 403 like the API, not shown as a form error after a redirect
    except DomainError as error:
        status = form_refused(request, error)
        request.GET = QueryDict(
            urlencode({"edit": budget.id})
        )  # the dialog open on this budget again
        return render(
            request,
            "frontend/budgets/dashboard.html",
            _dashboard_context(request, federation),
            status=status,
        )
    messages.success(
        request, f"{budget.organisation.name}'s ε limit is now {epsilon(budget.epsilon_limit)}."
    )
    return redirect("budget-dashboard", slug=federation.slug)


#: The price form's numbers: name → (what it is called in a sentence, its type).
PRICE_NUMBERS = {
    "noise": ("The noise (γ or σ)", float),
    "delta": ("δ", float),
    "n_queries": ("The number of public rows queried", int),
    "partitions": ("The number of partitions s", int),
}


def _price_number(form: dict, name: str):
    called, kind = PRICE_NUMBERS[name]
    try:
        return kind(form[name])
    except ValueError:
        example = "3 or 12" if kind is int else "0.04 or 1e-5"
        raise InvalidInput(
            f"{called} must be a {'whole ' if kind is int else ''}number such as {example}, not {form[name]!r}.",
            field=name,
        ) from None


def _privacy_from(form: dict) -> tuple[dict, int]:
    """The price form's fields as the services' privacy parameters and s; a sentence beside the field otherwise."""
    noise = _price_number(form, "noise")
    privacy = {
        "mechanism": form["mechanism"],
        "gamma": noise if form["mechanism"] == "laplace" else None,
        "sigma": noise if form["mechanism"] == "gaussian" else None,
        "delta": _price_number(form, "delta"),
        "n_queries": _price_number(form, "n_queries"),
    }
    return privacy, _price_number(form, "partitions")


@require_POST
@page
def budget_price_action(request, slug):
    """Price a job (dry run) or calibrate it; the answer is shown on the dashboard, nothing is reserved."""
    federation = federation_get(slug=slug, user=request.user)
    federation_require_member(federation=federation, user=request.user)
    form = {name: request.POST.get(name, "").strip() for name in PRICE_FIELDS}
    organisations = [
        budget.organisation_id for budget in budget_list(federation=federation, user=request.user)
    ]
    extra = {"price_form": form}
    try:
        privacy, partitions = _privacy_from(form)
        solve_for = request.POST.get("solve_for")
        if solve_for in ("noise", "queries"):
            extra["calibration"] = job_price_calibration(
                federation=federation,
                organisations=organisations,
                kind=job_kind_priced_default(),
                parameters={"partitions": partitions},
                privacy=privacy,
                solve_for=solve_for,
            )
            extra["quote"] = extra["calibration"]["price"]
        else:
            extra["quote"] = job_price_quote(
                federation=federation,
                organisations=organisations,
                kind=job_kind_priced_default(),
                parameters={"partitions": partitions},
                privacy=privacy,
            )
    except DomainError as error:
        return render(
            request,
            "frontend/budgets/dashboard.html",
            _dashboard_context(request, federation, **extra, price_refused=True),
            status=form_refused(request, error),
        )
    return render(
        request, "frontend/budgets/dashboard.html", _dashboard_context(request, federation, **extra)
    )


@require_GET
@page
def budget_ledger_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    filters = {
        name: request.GET.get(name, "").strip()
        for name in ("silo", "job", "kind", "since", "until")
    }
    entries = budget_ledger(federation=federation, user=request.user, **filters)
    page_of_entries = Paginator(entries, LEDGER_PER_PAGE).get_page(request.GET.get("page"))
    active = {name: value for name, value in filters.items() if value}
    return render(
        request,
        "frontend/budgets/ledger.html",
        {
            "section": "budgets",
            "federation": federation,
            "filters": filters,
            "kinds": EntryKind.choices,
            "silos": [
                (b.organisation_id, b.organisation.name)
                for b in budget_list(federation=federation, user=request.user)
            ],
            "entries": [
                entry_summary(entry, user=request.user, federation=federation)
                for entry in page_of_entries
            ],
            "page_of_entries": page_of_entries,
            "filter_query": urlencode(active),
            "csv_url": reverse("api-budget-ledger", args=[federation.slug])
            + "?"
            + urlencode({**active, "format": "csv"}),
        },
    )
