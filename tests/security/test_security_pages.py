import json

from django.test import Client

from market.accounts.models import ApiToken
from market.audit.models import AuditEvent
from market.audit.services import audit_record


def signed_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_operator_sees_the_log_and_a_verified_chain(operator, silo_user):
    audit_record(action="token.created", actor=silo_user, details={"name": "laptop"})
    response = signed_in(operator).get("/security/audit/")
    assert response.status_code == 200
    assert b'data-chain-ok="true"' in response.content
    assert b"token.created" in response.content and b"Northwind Hospital" in response.content


def test_the_audit_page_filters_by_action_and_outcome(operator, silo_user):
    audit_record(action="token.created", actor=silo_user)
    audit_record(action="auth.sign_in", outcome="refused", details={"username": "x"})
    response = signed_in(operator).get("/security/audit/?action=auth.&outcome=refused")
    assert [event.action for event in response.context["page_of_events"]] == ["auth.sign_in"]


def test_silos_cannot_read_the_audit_log(silo_user):
    browser = signed_in(silo_user)
    page = browser.get("/security/audit/")
    assert (
        page.status_code == 403 and b"Only market operators can read the audit log." in page.content
    )
    assert browser.get("/security/audit/export.jsonl").status_code == 403
    assert not AuditEvent.objects.filter(action="audit.exported").exists()


def test_the_export_download_is_json_lines_of_the_whole_chain(operator, silo_user):
    first = audit_record(action="token.created", actor=silo_user)
    response = signed_in(operator).get("/security/audit/export.jsonl")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"].startswith('attachment; filename="onefold-audit-')
    lines = [
        json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()
    ]
    assert [line["action"] for line in lines] == ["token.created", "auth.sign_in", "audit.exported"]
    assert (
        lines[0]["entry_hash"] == first.entry_hash and lines[1]["previous_hash"] == first.entry_hash
    )


def test_a_new_token_key_is_shown_once_and_revoking_it_from_the_page_works(silo_user):
    browser = signed_in(silo_user)
    created = browser.post(
        "/security/tokens/new/", {"name": "hospital server", "expires_in_days": "30"}
    )
    key = created.context["new_key"]
    assert created.status_code == 200 and key.encode() in created.content
    token = ApiToken.objects.get(user=silo_user, name="hospital server")
    assert key.encode() not in browser.get("/security/tokens/").content
    assert browser.post(f"/security/tokens/{token.id}/revoke/").status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_a_token_without_a_name_is_refused_on_the_page(silo_user):
    response = signed_in(silo_user).post("/security/tokens/new/", {"name": "  "})
    assert response.status_code == 400
    assert not ApiToken.objects.filter(user=silo_user).exists()
