from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """For rows that change only through services (with their locks, ledger entries and audit events): operators
    read them in the admin, never add, edit or delete them there."""

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
