"""Invitations in the app: the operator's People page (make an invitation, see its link once, withdraw one) and
the page an invitation link opens, where the invited person chooses a username and password and is signed in.

Both call market.invitations' services, as the API does. The acceptance form needs no one-time form key: its link's
token is itself used once, so a second send finds the invitation used and says so.
"""

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.password_validation import password_validators_help_texts
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from frontend.decorators import page, renders_domain_errors
from frontend.form_refusals import form_refused
from frontend.sent_once import sent_once
from market.accounts.selectors import organisation_list
from market.errors import DomainError
from market.federations.selectors import federation_get, federations_by_name
from market.invitations.apis import invitation_link
from market.invitations.models import InvitationKind
from market.invitations.selectors import invitation_for_token, invitation_list, invitation_state
from market.invitations.services import (
    INVITATION_MAX_DAYS,
    invitation_accept,
    invitation_create,
    invitation_revoke,
)

INVITATIONS_SHOWN = 100


def _people_context(request, **extra) -> dict:
    invitations = invitation_list(user=request.user)[:INVITATIONS_SHOWN]
    return {
        "section": "people",
        "kinds": InvitationKind.choices,
        "organisations": organisation_list(),
        "federations": federations_by_name(),
        "max_days": INVITATION_MAX_DAYS,
        "rows": [
            {"invitation": invitation, "state": invitation_state(invitation)}
            for invitation in invitations
        ],
        "form": request.POST if request.method == "POST" else request.GET,
        **extra,
    }


def _whole_number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdecimal() and len(text) < 10 else None


@require_http_methods(["GET", "POST"])
@page
@sent_once
def invitation_list_page(request):
    if request.method == "GET":
        return render(request, "frontend/operator/people.html", _people_context(request))
    post = request.POST
    try:
        slug = post.get("federation", "").strip()
        invitation, token = invitation_create(
            user=request.user,
            kind=post.get("kind", ""),
            organisation_name=post.get("organisation_name", ""),
            is_silo="is_silo" in post,
            is_buyer="is_buyer" in post,
            organisation_id=_whole_number(post.get("organisation_id", "")),
            federation=federation_get(slug=slug, user=request.user) if slug else None,
            email=post.get("email", ""),
            expires_in_days=_whole_number(post.get("expires_in_days", "")),
            request=request,
        )
    except DomainError as error:
        return render(
            request,
            "frontend/operator/people.html",
            _people_context(request),
            status=form_refused(request, error),
        )
    # The link is shown on this response only; it is not stored and a reload does not show it again.
    context = _people_context(
        request, new_invitation=invitation, new_link=invitation_link(request, token)
    )
    context["form"] = {}
    return render(request, "frontend/operator/people.html", context)


@require_POST
@page
@sent_once
def invitation_revoke_action(request, invitation_id):
    invitation = invitation_revoke(invitation_id=invitation_id, user=request.user, request=request)
    messages.success(request, f"Invitation #{invitation.id} withdrawn: its link no longer works.")
    return redirect("invitation-list")


def _accept_page(request, context: dict, status: int = 200):
    context["password_help"] = password_validators_help_texts()
    return render(request, "frontend/invitation_accept.html", context, status=status)


@require_http_methods(["GET", "POST"])
@renders_domain_errors
def invitation_accept_page(request, token):
    """Open to anyone with the link; an unknown, used, withdrawn or expired link is an error page (404, 410)."""
    if request.method == "GET":
        invitation = invitation_for_token(token=token, request=request)
        return _accept_page(request, {"invitation": invitation, "form": {}})
    try:
        person = invitation_accept(
            token=token,
            username=request.POST.get("username", ""),
            password=request.POST.get("password", ""),
            request=request,
        )
    except DomainError as error:
        if getattr(error, "field", None) is None and error.status_code in (404, 410, 429):
            raise  # the link itself does not work: the error page says why
        invitation = invitation_for_token(token=token, request=request)
        context = {"invitation": invitation, "form": request.POST}
        return _accept_page(request, context, status=form_refused(request, error))
    login(request, person, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(
        request, f"Welcome, {person.username}: you are signed in to {person.organisation.name}."
    )
    return redirect("home")
