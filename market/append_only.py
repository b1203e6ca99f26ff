"""Append-only tables enforced by PostgreSQL itself: a trigger refuses UPDATE and DELETE on every row.

SQLite (the one-machine demo) relies on the services alone. TRUNCATE is left to the table's owner (the test
runner's flush uses it).
"""

from django.db import migrations


def append_only_trigger(table: str, *, what: str) -> migrations.RunPython:
    """A migration operation that makes ``table`` append-only; ``what`` names its rows in the error message."""
    function = f"{table}_refuse_change"
    create = f"""
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = '{what} are append-only: ' || TG_OP || ' on {table} is refused';
END
$$;
CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {function}();
"""
    drop = f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}; DROP FUNCTION IF EXISTS {function}();"
    return migrations.RunPython(_on_postgresql(create), _on_postgresql(drop), elidable=False)


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run
