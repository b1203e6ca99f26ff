"""Membership in the app: a silo joins or asks to join (frontend.views), the operator admits or refuses join
requests, removes members (the federation's Members tab, frontend.federation_hub) and edits a federation.

Each page calls the service the API calls (market.federations.membership, market.federations.services), which
checks the operator role and writes the audit event; a refusal is shown with the API's sentence.
"""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from frontend.decorators import page
from frontend.form_refusals import form_refused
from frontend.sent_once import sent_once
from market.errors import DomainError
from market.federations.membership import (
    join_request_admit,
    join_request_refuse,
    membership_remove,
)
from market.federations.models import MembershipPolicy, RevenueSplit
from market.federations.selectors import federation_get, require_operator
from market.federations.services import federation_update


def _members_tab(slug: str) -> str:
    return f"{reverse('federation-detail', args=[slug])}?tab=members"


@require_POST
@page
@sent_once
def join_request_admit_action(request, join_request_id):
    join_request = join_request_admit(
        join_request_id=join_request_id, user=request.user, request=request
    )
    messages.success(
        request,
        f"{join_request.organisation.name} is now a member of {join_request.federation.name}.",
    )
    return redirect(_members_tab(join_request.federation.slug))


@require_POST
@page
@sent_once
def join_request_refuse_action(request, join_request_id):
    join_request = join_request_refuse(
        join_request_id=join_request_id,
        user=request.user,
        reason=request.POST.get("reason", ""),
        request=request,
    )
    messages.success(
        request,
        f"{join_request.organisation.name}'s request to join {join_request.federation.name} was refused.",
    )
    return redirect(_members_tab(join_request.federation.slug))


@require_POST
@page
@sent_once
def member_remove_action(request, slug, organisation_id):
    federation = federation_get(slug=slug, user=request.user)
    organisation = membership_remove(
        federation=federation, organisation_id=organisation_id, user=request.user, request=request
    )
    messages.success(
        request,
        f"{organisation.name} is no longer a member of {federation.name}. Its past submissions, jobs, "
        "budget and ledger are kept; it cannot upload or be in new jobs.",
    )
    return redirect(_members_tab(federation.slug))


@require_http_methods(["GET", "POST"])
@page
@sent_once
def federation_edit_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    require_operator(request.user, "edit federations")
    context = {
        "section": "federations",
        "federation": federation,
        "policies": MembershipPolicy.choices,
        "revenue_splits": RevenueSplit.choices,
        "form": request.POST
        if request.method == "POST"
        else {
            "name": federation.name,
            "description": federation.description,
            "membership_policy": federation.membership_policy,
            "revenue_split": federation.revenue_split,
        },
    }
    if request.method == "GET":
        return render(request, "frontend/operator/federation_edit.html", context)
    try:
        federation_update(
            federation=federation,
            user=request.user,
            name=request.POST.get("name", ""),
            description=request.POST.get("description", ""),
            membership_policy=request.POST.get("membership_policy", ""),
            revenue_split=request.POST.get("revenue_split") or None,
            request=request,
        )
    except DomainError as error:
        return render(
            request,
            "frontend/operator/federation_edit.html",
            context,
            status=form_refused(request, error),
        )
    messages.success(request, "Federation saved.")
    return redirect("federation-detail", slug=federation.slug)
