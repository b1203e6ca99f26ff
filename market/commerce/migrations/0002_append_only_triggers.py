"""On PostgreSQL, wallet entries cannot be changed or deleted, and a published listing cannot change what it
sells (model, price, licence). SQLite (the one-machine demo) relies on the services alone."""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION commerce_refuse_entry_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'wallet entries are append-only: % of entry % refused', TG_OP, OLD.id;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER commerce_walletentry_append_only BEFORE UPDATE OR DELETE ON commerce_walletentry
    FOR EACH ROW EXECUTE FUNCTION commerce_refuse_entry_change();

CREATE OR REPLACE FUNCTION commerce_refuse_published_listing_change() RETURNS trigger AS $$
BEGIN
    IF OLD.status <> 'draft' AND (NEW.global_model_id <> OLD.global_model_id OR NEW.price_cents <> OLD.price_cents
                                  OR NEW.licence_text <> OLD.licence_text) THEN
        RAISE EXCEPTION 'listing % is %: what it sells cannot change; publish a new version', OLD.id, OLD.status;
    END IF;
    IF OLD.status = 'retired' AND NEW.status <> 'retired' THEN
        RAISE EXCEPTION 'listing % is retired and cannot come back', OLD.id;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER commerce_listing_sells_one_thing BEFORE UPDATE ON commerce_listing
    FOR EACH ROW EXECUTE FUNCTION commerce_refuse_published_listing_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS commerce_walletentry_append_only ON commerce_walletentry;
DROP FUNCTION IF EXISTS commerce_refuse_entry_change();
DROP TRIGGER IF EXISTS commerce_listing_sells_one_thing ON commerce_listing;
DROP FUNCTION IF EXISTS commerce_refuse_published_listing_change();
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("commerce", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
