import io
import json

import pytest
from django.core.management import CommandError, call_command

from market.audit.models import AuditEvent
from market.audit.services import audit_record


def test_audit_verify_prints_the_count_and_head(silo_user):
    event = audit_record(action="token.created", actor=silo_user)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue() == f"The audit chain verifies: 1 entries, head {event.entry_hash}.\n"


def test_audit_verify_fails_on_an_edited_entry(silo_user, audit_trigger_disabled):
    event = audit_record(action="token.created", actor=silo_user)
    AuditEvent.objects.filter(id=event.id).update(action="token.revoked")
    with pytest.raises(
        CommandError, match=f"broken after 0 good entries. Entry {event.id} does not match its hash"
    ):
        call_command("audit_verify", stdout=io.StringIO())


def test_audit_verify_exits_non_zero_from_the_shell_on_a_broken_chain(
    silo_user, audit_trigger_disabled
):
    from django.core.management import execute_from_command_line

    event = audit_record(action="token.created", actor=silo_user)
    AuditEvent.objects.filter(id=event.id).update(action="token.revoked")
    with pytest.raises(SystemExit) as exit_info:
        execute_from_command_line(["manage.py", "audit_verify"])
    assert exit_info.value.code == 1


def test_audit_verify_with_an_expected_head_that_is_gone_fails(silo_user):
    audit_record(action="token.created", actor=silo_user)
    with pytest.raises(CommandError, match="no longer in the chain"):
        call_command("audit_verify", "--expect-head", "f" * 64, stdout=io.StringIO())


def test_audit_export_writes_one_json_line_per_entry_and_audits_itself(silo_user, tmp_path):
    first = audit_record(action="token.created", actor=silo_user, details={"name": "laptop"})
    second = audit_record(action="auth.sign_in", outcome="refused", details={"username": "nobody"})
    target = tmp_path / "audit.jsonl"
    out = io.StringIO()
    call_command("audit_export", "--output", str(target), stdout=out)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert out.getvalue() == f"Wrote 2 audit entries to {target}.\n"
    assert [line["id"] for line in lines] == [first.id, second.id]
    assert lines[0] == {
        "id": first.id,
        "created_at": first.created_at.isoformat(),
        "actor_id": silo_user.id,
        "organisation_id": silo_user.organisation_id,
        "action": "token.created",
        "object_type": "",
        "object_id": "",
        "outcome": "success",
        "client_address": None,
        "details": {"name": "laptop"},
        "previous_hash": first.previous_hash,
        "entry_hash": first.entry_hash,
        "actor": "sam-silo",
        "organisation": "Northwind Hospital",
    }
    assert (lines[1]["actor"], lines[1]["organisation"]) == ("system", "")
    assert lines[1]["previous_hash"] == first.entry_hash
    exported = AuditEvent.objects.order_by("-id").first()
    assert (exported.action, exported.details) == (
        "audit.exported",
        {"entries": 2, "via": "command"},
    )


def test_audit_export_to_standard_output(silo_user):
    audit_record(action="token.created", actor=silo_user)
    out = io.StringIO()
    call_command("audit_export", stdout=out)
    assert [json.loads(line)["action"] for line in out.getvalue().splitlines()] == ["token.created"]


def test_audit_verify_checks_an_exported_file_and_finds_an_edited_or_removed_line(
    silo_user, tmp_path
):
    audit_record(action="token.created", actor=silo_user, details={"name": "laptop", "n": 0.1})
    audit_record(action="auth.sign_in", outcome="refused", details={"username": "nobody"})
    exported = tmp_path / "audit.jsonl"
    call_command("audit_export", "--output", str(exported), stdout=io.StringIO())
    lines = exported.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    out = io.StringIO()
    call_command("audit_verify", "--file", str(exported), stdout=out)
    assert out.getvalue() == (
        f"The exported audit chain in {exported} verifies: 2 entries, head {last['entry_hash']}.\n"
    )

    edited = tmp_path / "edited.jsonl"
    first = json.loads(lines[0])
    first["details"]["name"] = "phone"
    edited.write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    with pytest.raises(CommandError, match=f"Entry {first['id']} does not match its hash"):
        call_command("audit_verify", "--file", str(edited), stdout=io.StringIO())

    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[1:]))
    with pytest.raises(CommandError, match="does not follow the entry before it"):
        call_command("audit_verify", "--file", str(cut), stdout=io.StringIO())
    with pytest.raises(CommandError, match="no longer in the chain"):
        call_command(
            "audit_verify",
            "--file",
            str(exported),
            "--expect-head",
            "f" * 64,
            stdout=io.StringIO(),
        )

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"id": 1}\n')
    with pytest.raises(CommandError, match="Line 1 is not an audit entry of an export"):
        call_command("audit_verify", "--file", str(garbage), stdout=io.StringIO())
