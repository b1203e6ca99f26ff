"""The audit table refuses UPDATE and DELETE in the database itself (PostgreSQL; SQLite demos rely on the code).

TRUNCATE is left to the table's owner (the test runner's flush uses it); the hash chain still shows a
truncated log as shorter than its recorded head.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_event_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = 'audit events are append-only: ' || TG_OP || ' on audit_auditevent is refused';
END
$$;
CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_event_refuse_change();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_event_append_only ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_event_refuse_change();
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP), elidable=False)]
