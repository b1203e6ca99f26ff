import pytest
from django.db import DatabaseError, connection, transaction

from market.audit.models import AuditEvent, AuditOutcome
from market.audit.selectors import audit_chain_verify
from market.audit.services import GENESIS_HASH, audit_record


def three_events(user):
    return [
        audit_record(action="token.created", actor=user, details={"name": "laptop"}),
        audit_record(
            action="auth.sign_in", outcome=AuditOutcome.REFUSED, details={"username": "sam-silo"}
        ),
        audit_record(
            action="membership.joined", actor=user, details={"federation": "adult-income"}
        ),
    ]


def test_an_untouched_chain_verifies_and_reports_its_head(silo_user):
    events = three_events(silo_user)
    verdict = audit_chain_verify()
    assert (verdict.ok, verdict.checked, verdict.head_hash, verdict.problem) == (
        True,
        3,
        events[-1].entry_hash,
        "",
    )
    assert events[0].previous_hash == GENESIS_HASH
    assert [event.previous_hash for event in events[1:]] == [
        event.entry_hash for event in events[:-1]
    ]


def test_an_empty_log_verifies(db):
    assert audit_chain_verify().as_dict() == {
        "ok": True,
        "checked": 0,
        "head_hash": GENESIS_HASH,
        "broken_at_id": None,
        "problem": "",
    }


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only"
)
@pytest.mark.parametrize(
    "statement", ["UPDATE audit_auditevent SET outcome = 'success'", "DELETE FROM audit_auditevent"]
)
def test_the_database_refuses_to_update_or_delete_audit_entries(silo_user, statement):
    three_events(silo_user)
    with (
        pytest.raises(DatabaseError, match="audit events are append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement)
    assert AuditEvent.objects.count() == 3
    assert audit_chain_verify().ok


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only"
)
def test_the_orm_cannot_edit_an_entry_either(silo_user):
    event = three_events(silo_user)[1]
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=event.id).update(outcome=AuditOutcome.SUCCESS)
    assert AuditEvent.objects.get(id=event.id).outcome == AuditOutcome.REFUSED


def test_verify_detects_an_edited_entry(silo_user, audit_trigger_disabled):
    events = three_events(silo_user)
    AuditEvent.objects.filter(id=events[1].id).update(outcome=AuditOutcome.SUCCESS)
    verdict = audit_chain_verify()
    assert (verdict.ok, verdict.checked, verdict.broken_at_id) == (False, 1, events[1].id)
    assert (
        verdict.problem
        == f"Entry {events[1].id} does not match its hash: it was edited after it was written."
    )


def test_verify_detects_an_edit_that_also_recomputed_the_entrys_own_hash(
    silo_user, audit_trigger_disabled
):
    from market.audit.services import audit_entry_hash, audit_event_fields

    events = three_events(silo_user)
    forged = AuditEvent.objects.get(id=events[1].id)
    forged.details = {"username": "someone-else"}
    forged_hash = audit_entry_hash(
        previous_hash=forged.previous_hash, fields=audit_event_fields(forged)
    )
    AuditEvent.objects.filter(id=forged.id).update(details=forged.details, entry_hash=forged_hash)
    verdict = audit_chain_verify()
    assert (verdict.ok, verdict.broken_at_id) == (False, events[2].id)
    assert "an entry was deleted, inserted or reordered" in verdict.problem


def test_verify_detects_a_deleted_entry(silo_user, audit_trigger_disabled):
    events = three_events(silo_user)
    AuditEvent.objects.filter(id=events[1].id).delete()
    verdict = audit_chain_verify()
    assert (verdict.ok, verdict.checked, verdict.broken_at_id) == (False, 1, events[2].id)


def test_verify_detects_the_first_entry_deleted(silo_user, audit_trigger_disabled):
    events = three_events(silo_user)
    AuditEvent.objects.filter(id=events[0].id).delete()
    assert (audit_chain_verify().ok, audit_chain_verify().broken_at_id) == (False, events[1].id)


def test_verify_detects_reordered_entries(silo_user, audit_trigger_disabled):
    events = three_events(silo_user)
    first, second = events[0].id, events[1].id
    spare = events[2].id + 1000
    AuditEvent.objects.filter(id=first).update(id=spare)
    AuditEvent.objects.filter(id=second).update(id=first)
    AuditEvent.objects.filter(id=spare).update(id=second)
    verdict = audit_chain_verify()
    assert (verdict.ok, verdict.checked, verdict.broken_at_id) == (False, 0, first)


def test_verify_detects_entries_removed_from_the_end_only_against_a_recorded_head(
    silo_user, audit_trigger_disabled
):
    events = three_events(silo_user)
    recorded_head = audit_chain_verify().head_hash
    AuditEvent.objects.filter(id=events[2].id).delete()
    assert audit_chain_verify().ok  # the chain alone cannot tell that its end is missing
    verdict = audit_chain_verify(expected_head=recorded_head)
    assert (verdict.ok, verdict.checked) == (False, 2)
    assert "removed from its end" in verdict.problem
    assert audit_chain_verify(
        expected_head=events[1].entry_hash
    ).ok  # an older recorded head is still in the chain
