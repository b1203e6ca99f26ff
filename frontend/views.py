"""Page views: parse the request, call one market selector or service, render a template.

Pages call the same services and selectors as the REST API; the upload itself goes from the
browser straight to the API (``POST /api/submissions/``), so there is one upload path to secure.
"""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from frontend.federation_hub import hub_context
from frontend.sent_once import sent_once
from frontend.toolkit_commands import toolkit_commands
from market.errors import NotFound, PermissionDenied
from market.federations.membership import federation_join
from market.federations.models import Federation, PrivacyLevel
from market.federations.selectors import (
    federation_get,
    federation_list,
    federation_require_member,
    join_request_latest_refusal,
    public_dataset_current,
)
from market.submissions.models import ModelFamily
from market.submissions.selectors import submission_get, submission_list


@require_GET
@page
def federation_list_page(request):
    return render(
        request,
        "frontend/federation_list.html",
        {"section": "federations", "federations": federation_list(user=request.user)},
    )


def membership_terms(*, federation: Federation) -> dict:
    """What a silo commits to by joining, shown before it joins: the ε limit and δ each member gets, how a sale's
    revenue is split, and the columns its rows must have (names and types only: the encoding's statistics are
    the members')."""
    public_dataset = federation.public_datasets.first()
    return {
        "epsilon_limit": federation.default_epsilon_limit,
        "delta": federation.default_delta,
        "revenue_split": federation.get_revenue_split_display(),
        "columns": [
            {"name": column["name"], "type": column["type"]}
            for column in (public_dataset.feature_spec["columns"] if public_dataset else [])
        ],
    }


def public_data_for(*, federation: Federation, user) -> dict:
    """Members and operators see the public data (or that there is none yet); anyone else gets a join prompt."""
    try:
        federation_require_member(federation=federation, user=user)
    except PermissionDenied:
        return {
            "may_use_public_data": False,
            "public_dataset": None,
            "membership_terms": membership_terms(federation=federation),
        }
    try:
        return {
            "may_use_public_data": True,
            "public_dataset": public_dataset_current(federation=federation),
        }
    except NotFound:
        return {"may_use_public_data": True, "public_dataset": None}


@require_GET
@page
def federation_detail_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    public_data = public_data_for(federation=federation, user=request.user)
    organisation = request.user.organisation
    at_home = (
        federation.is_member
        and public_data["public_dataset"]
        and organisation
        and organisation.is_silo
    )
    return render(
        request,
        "frontend/federation_detail.html",
        {
            "section": "federations",
            "federation": federation,
            "refused_request": join_request_latest_refusal(
                federation=federation, user=request.user
            ),
            "privacy_levels": privacy_level_choices(federation),
            "toolkit_commands": toolkit_commands(request, federation) if at_home else None,
            **public_data,
            **hub_context(request, federation),
        },
    )


@require_POST
@page
@sent_once
def federation_join_action(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    outcome = federation_join(federation=federation, user=request.user, request=request)
    organisation = request.user.organisation.name
    if outcome.membership is None:
        messages.success(
            request,
            f"{organisation} asked to join {federation.name}; the market's operator admits or refuses "
            "the request.",
        )
    elif outcome.created:
        messages.success(request, f"{organisation} joined {federation.name}.")
    else:
        messages.info(request, f"{organisation} was already a member of {federation.name}.")
    return redirect("federation-detail", slug=federation.slug)


def privacy_level_choices(federation: Federation) -> list[tuple[str, str]]:
    return [(level, PrivacyLevel(level).label) for level in federation.allowed_privacy_levels]


def feature_view_choices(public_dataset) -> list[tuple[str, str]]:
    """The views a submission may declare (workers.features), each with the width its models must read."""
    from workers.features import ONE_HOT_VIEW, ORDINAL_VIEW, view_width

    spec = getattr(public_dataset, "feature_spec", None)
    width = (lambda view: f" — {view_width(spec, view)} features") if spec else (lambda view: "")
    return [
        (ONE_HOT_VIEW, f"One-hot, standardised{width(ONE_HOT_VIEW)}"),
        (ORDINAL_VIEW, f"Ordinal codes, one per column{width(ORDINAL_VIEW)}"),
    ]


@require_GET
@page
def submission_upload_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    federation_require_member(federation=federation, user=request.user)
    public_dataset = public_dataset_current(federation=federation)
    return render(
        request,
        "frontend/submission_upload.html",
        {
            "section": "federations",
            "federation": federation,
            "public_dataset": public_dataset,
            "model_families": ModelFamily.choices,
            "privacy_levels": privacy_level_choices(federation),
            "feature_views": feature_view_choices(public_dataset),
            "api_url": reverse("api-submission-list"),
            "max_upload_bytes": settings.ONEFOLD_MAX_UPLOAD_BYTES,
        },
    )


SUBMISSIONS_PER_PAGE = 50  # the API's page size


@require_GET
@page
def submission_list_page(request):
    federation_slug = request.GET.get("federation") or None
    submissions = submission_list(user=request.user, federation_slug=federation_slug)
    return render(
        request,
        "frontend/submission_list.html",
        {
            "section": "submissions",
            "federation_slug": federation_slug,
            "submissions": Paginator(submissions, SUBMISSIONS_PER_PAGE).get_page(
                request.GET.get("page")
            ),
        },
    )


@require_GET
@page
def submission_status_partial(request, submission_id):
    """The status badge htmx polls: it keeps polling itself until the status is final.

    ``?explain=1`` adds a sentence on what the status means (the upload page has room for it; the list has not).
    """
    submission = submission_get(submission_id=submission_id, user=request.user)
    return render(
        request,
        "frontend/partials/submission_status.html",
        {"submission": submission, "show_explanation": request.GET.get("explain") == "1"},
    )
