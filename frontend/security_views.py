"""Security pages: the operator's audit log (verification and JSON-lines export) and everyone's API tokens."""

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from frontend.audit_rows import audit_rows
from frontend.decorators import page
from frontend.sent_once import sent_once
from market.accounts.selectors import api_token_list, api_token_state
from market.accounts.services import api_token_create, api_token_revoke
from market.audit.models import AuditOutcome
from market.audit.selectors import (
    audit_chain_verify,
    audit_event_query,
    audit_json_lines,
    audit_require_reader,
)
from market.audit.services import audit_record

EVENTS_PER_PAGE = 50


@require_GET
@page
def audit_log_page(request):
    audit_require_reader(user=request.user)
    action_prefix = request.GET.get("action", "").strip()[:100]
    outcome = (
        request.GET.get("outcome", "") if request.GET.get("outcome") in AuditOutcome.values else ""
    )
    events = Paginator(
        audit_event_query(action_prefix=action_prefix, outcome=outcome), EVENTS_PER_PAGE
    ).get_page(request.GET.get("page"))
    filters = urlencode(
        {name: value for name, value in (("action", action_prefix), ("outcome", outcome)) if value}
    )
    return render(
        request,
        "frontend/security/audit_log.html",
        {
            "section": "audit",
            "verdict": audit_chain_verify(),
            "action_prefix": action_prefix,
            "outcome": outcome,
            "outcomes": AuditOutcome.choices,
            "page_of_events": events,
            "rows": audit_rows(events),
            "filter_query": filters,
        },
    )


@require_GET
@page
def audit_export_download(request):
    audit_require_reader(user=request.user)
    audit_record(
        action="audit.exported", actor=request.user, request=request, details={"via": "web"}
    )
    response = StreamingHttpResponse(audit_json_lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = (
        f'attachment; filename="onefold-audit-{timezone.now():%Y%m%dT%H%M%SZ}.jsonl"'
    )
    return response


def _token_rows(user) -> list[dict]:
    return [
        {"token": token, "state": api_token_state(token)} for token in api_token_list(user=user)
    ]


@require_GET
@page
def token_list_page(request):
    return render(
        request,
        "frontend/security/tokens.html",
        {"section": "tokens", "tokens": _token_rows(request.user)},
    )


@require_POST
@page
@sent_once
def token_create_action(request):
    days = request.POST.get("expires_in_days", "").strip()
    token, key = api_token_create(
        user=request.user,
        name=request.POST.get("name", ""),
        expires_in_days=int(days) if days.isdecimal() and len(days) < 10 else None,
        request=request,
    )  # isdigit() admits "²", which int() refuses
    # The key is shown on this response only; it is not stored and a reload does not show it again.
    return render(
        request,
        "frontend/security/tokens.html",
        {
            "section": "tokens",
            "tokens": _token_rows(request.user),
            "new_token": token,
            "new_key": key,
        },
    )


@require_POST
@page
@sent_once
def token_revoke_action(request, token_id):
    api_token_revoke(user=request.user, token_id=token_id, request=request)
    return redirect("token-list")
