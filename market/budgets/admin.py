from django.contrib import admin

from market.budgets.models import BudgetEntry, PrivacyBudget
from market.read_only_admin import ReadOnlyAdmin


@admin.register(PrivacyBudget)
class PrivacyBudgetAdmin(ReadOnlyAdmin):
    """Read-only: limits change through the dashboard or the API, so every change is on the ledger and audited."""

    list_display = [
        "federation",
        "organisation",
        "epsilon_limit",
        "spent",
        "reserved",
        "composition_rule",
    ]
    list_filter = ["federation"]


@admin.register(BudgetEntry)
class BudgetEntryAdmin(ReadOnlyAdmin):
    """The append-only ledger, for reading."""

    list_display = [
        "created_at",
        "budget",
        "kind",
        "epsilon",
        "unit",
        "spender_kind",
        "spender_id",
        "actor",
    ]
    list_filter = ["kind", "budget__federation"]
