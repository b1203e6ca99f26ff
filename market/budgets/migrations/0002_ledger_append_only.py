"""The budget ledger refuses UPDATE and DELETE in the database itself (PostgreSQL; SQLite demos rely on the code).

TRUNCATE is left to the table's owner (the test runner's flush uses it).
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION budget_entry_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = 'privacy budget ledger entries are append-only: ' || TG_OP || ' on budgets_budgetentry is refused';
END
$$;
CREATE TRIGGER budget_entry_append_only BEFORE UPDATE OR DELETE ON budgets_budgetentry
    FOR EACH ROW EXECUTE FUNCTION budget_entry_refuse_change();
"""
DROP = """
DROP TRIGGER IF EXISTS budget_entry_append_only ON budgets_budgetentry;
DROP FUNCTION IF EXISTS budget_entry_refuse_change();
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [("budgets", "0001_initial")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP), elidable=False)]
