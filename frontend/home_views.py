"""Home pages: each role lands on what it came for, its balance or budget, its recent activity and its next action.

An operator sees the market's state; a silo its memberships, budgets and earnings; a buyer its balance and
purchases. An organisation that is both a silo and a buyer sees both halves on one page.
"""

from django.contrib.auth.views import LoginView
from django.shortcuts import render
from django.views.decorators.http import require_GET

from frontend.decorators import page
from frontend.navigation import roles_of
from market.accounts.forms import SignInForm
from market.accounts.selectors import operator_exists
from market.audit.selectors import audit_event_list
from market.budgets.selectors import budget_list, budget_summary
from market.commerce.selectors import (
    credit_requests_waiting_count,
    earnings_for,
    listing_list,
    purchase_list,
    wallet_for,
)
from market.federations.selectors import (
    federation_list,
    federations_joined,
    join_requests_waiting,
)
from market.jobs.selectors import job_counts, job_list
from market.submissions.selectors import submission_list

RECENT = 5


def _operator_context(user) -> dict:
    jobs = job_list(user=user)
    return {
        "federation_count": federation_list(user=user).count(),
        **job_counts(user=user),
        "join_requests_waiting": join_requests_waiting(user=user),
        "credit_requests_waiting": credit_requests_waiting_count(user=user),
        "recent_jobs": jobs.order_by("-created_at", "-id")[:RECENT],
        "recent_events": audit_event_list(limit=RECENT),
    }


def _silo_context(user) -> dict:
    memberships = list(federations_joined(user=user))
    budgets = [
        {**budget_summary(budget), "federation_name": federation.name}
        for federation in memberships
        for budget in budget_list(federation=federation, user=user)
    ]
    return {
        "memberships": memberships,
        "budgets": budgets,
        "earned_cents": earnings_for(organisation=user.organisation)["total_cents"],
        "recent_submissions": submission_list(user=user).order_by("-created_at", "-id")[:RECENT],
    }


def _buyer_context(user) -> dict:
    return {
        "balance_cents": wallet_for(user=user)[1],
        "recent_purchases": purchase_list(user=user)[:RECENT],
        "listing_count": listing_list(user=user).count(),
    }


@require_GET
@page
def home(request):
    roles = roles_of(request.user)
    context = {"section": "home", "roles": roles}
    if "operator" in roles:
        context.update(_operator_context(request.user))
    if "silo" in roles:
        context.update(_silo_context(request.user))
    if "buyer" in roles:
        context.update(_buyer_context(request.user))
    return render(request, "frontend/home/home.html", context)


class SignInView(LoginView):
    """The sign-in page; on a market with no operator yet it says how to create the first one."""

    template_name = "frontend/login.html"
    redirect_authenticated_user = True
    authentication_form = SignInForm

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "first_run": not operator_exists()}
