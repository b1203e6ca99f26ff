"""The budget ledger refuses UPDATE and DELETE in the database itself (PostgreSQL)."""

from django.db import migrations

from market.append_only import append_only_trigger


class Migration(migrations.Migration):

    dependencies = [("budgets", "0001_initial")]

    operations = [append_only_trigger("budgets_budgetentry", what="privacy budget ledger entries")]
