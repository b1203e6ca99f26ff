import pytest
from django.db import connection


@pytest.fixture
def audit_trigger_disabled(db):
    """Lets a test tamper with the audit table as an attacker with database access would (PostgreSQL only).

    The invariant check skips the audit chain for tests that use this fixture; the test's transaction
    rolls back the tampering and re-enables the trigger (ALTER TABLE is transactional in PostgreSQL).
    """
    if connection.vendor != "postgresql":
        pytest.skip("the append-only trigger exists on PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute(
            "SET CONSTRAINTS ALL IMMEDIATE"
        )  # ALTER TABLE refuses while foreign-key checks are pending
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_auditevent_append_only")
