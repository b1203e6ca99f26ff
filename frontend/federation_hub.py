"""The federation page as a hub: one tab per thing a federation holds (overview, data, submissions, jobs, budgets,
models, exchanges, members). Each tab reads through the same selectors as the API, with the same rule on who sees what."""

from django.core.paginator import Paginator

from frontend.budget_charts import budget_overview, budgets_ranked
from market.augmentations.selectors import augmentation_list
from market.budgets.selectors import budget_list
from market.commerce.selectors import CatalogFilters, listing_list
from market.errors import NotFound, PermissionDenied
from market.exchanges.selectors import exchange_list
from market.federations.selectors import (
    evaluation_split_current,
    federation_require_member,
    join_requests_pending,
    member_list,
)
from market.jobs.selectors import job_list
from market.submissions.selectors import submission_list

ROWS_PER_TAB = 20
TABS = (
    ("overview", "Overview"),
    ("data", "Data"),
    ("submissions", "Submissions"),
    ("jobs", "Jobs"),
    ("budgets", "Budgets"),
    ("models", "Models"),
    ("exchanges", "Exchanges"),
    ("members", "Members"),
)


def tabs_for(user) -> list[tuple[str, str]]:
    """Every tab for operators; members is the operator's (a silo sees its own budget on the budgets tab)."""
    return [tab for tab in TABS if tab[0] != "members" or user.is_operator]


def _is_member_or_operator(federation, user) -> bool:
    try:
        federation_require_member(federation=federation, user=user)
    except PermissionDenied:
        return False
    return True


def _page(items, request):
    return Paginator(items, ROWS_PER_TAB).get_page(request.GET.get("page"))


def _data(request, federation) -> dict:
    if not request.user.is_operator:
        return {}
    try:
        return {
            "evaluation_split": evaluation_split_current(federation=federation, user=request.user)
        }
    except NotFound:
        return {"evaluation_split": None}


def _submissions(request, federation) -> dict:
    submissions = submission_list(user=request.user, federation_slug=federation.slug)
    return {"page_of_rows": _page(submissions.order_by("-created_at", "-id"), request)}


def _jobs(request, federation) -> dict:
    jobs = job_list(user=request.user, federation_slug=federation.slug)
    return {"page_of_rows": _page(jobs.order_by("-created_at", "-id"), request)}


def _budgets(request, federation) -> dict:
    if not _is_member_or_operator(federation, request.user):
        return {"budgets_hidden": True}
    ranked = budgets_ranked(budget_list(federation=federation, user=request.user))
    return {"overview": budget_overview(ranked), "fullest": ranked[:5]}


def _models(request, federation) -> dict:
    listings = listing_list(user=request.user, filters=CatalogFilters(federation=federation.slug))
    return {"page_of_rows": _page(listings, request)}


def _exchanges(request, federation) -> dict:
    """The federation's FD exchanges and federated augmentations (a silo: those of its federations only)."""
    return {
        "exchanges": exchange_list(user=request.user, federation=federation),
        "augmentations": augmentation_list(user=request.user, federation=federation),
    }


def _members(request, federation) -> dict:
    """Operators: the requests waiting to be admitted or refused, and the members (each with a Remove form)."""
    waiting = join_requests_pending(federation=federation, user=request.user)
    members = member_list(federation=federation, user=request.user)
    return {"join_requests": waiting, "page_of_rows": _page(members, request)}


TAB_CONTEXT = {
    "data": _data,
    "submissions": _submissions,
    "jobs": _jobs,
    "budgets": _budgets,
    "models": _models,
    "exchanges": _exchanges,
    "members": _members,
}


def hub_context(request, federation) -> dict:
    """The chosen tab (overview when the name is unknown) and what it shows."""
    tabs = tabs_for(request.user)
    tab = request.GET.get("tab", "overview")
    tab = tab if tab in dict(tabs) else "overview"
    extra = TAB_CONTEXT[tab](request, federation) if tab in TAB_CONTEXT else {}
    return {"tabs": tabs, "tab": tab, **extra}
