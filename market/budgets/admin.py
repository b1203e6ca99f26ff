from django.contrib import admin

from market.budgets.models import BudgetEntry, PrivacyBudget


@admin.register(PrivacyBudget)
class PrivacyBudgetAdmin(admin.ModelAdmin):
    """Read-only: limits change through the dashboard or the API, so every change is on the ledger and audited."""

    list_display = ["federation", "organisation", "epsilon_limit", "spent", "reserved", "composition_rule"]
    list_filter = ["federation"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(BudgetEntry)
class BudgetEntryAdmin(admin.ModelAdmin):
    """The append-only ledger, for reading."""

    list_display = ["created_at", "budget", "kind", "epsilon", "unit", "job", "submission", "actor"]
    list_filter = ["kind", "budget__federation"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
