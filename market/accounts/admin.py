from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from market.accounts.forms import AdminSignInForm
from market.accounts.models import ApiToken, Organisation, User
from market.audit.services import audit_record

admin.site.login_form = AdminSignInForm  # failed sign-ins are limited on the admin's page too
ROLE_FIELDS = ("is_staff", "is_superuser", "is_active", "organisation_id")


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ("name", "is_silo", "is_buyer", "created_at")
    search_fields = ("name",)


@admin.register(User)
class OnefoldUserAdmin(UserAdmin):
    list_display = ("username", "organisation", "is_staff", "is_active")
    list_filter = ("is_staff", "organisation")
    fieldsets = UserAdmin.fieldsets + (("Onefold", {"fields": ("organisation",)}),)

    def save_model(self, request, obj, form, change):
        """Changes of role (operator, superuser, active) or organisation are security events: audit them."""
        before = User.objects.filter(pk=obj.pk).values(*ROLE_FIELDS).first() if change else None
        super().save_model(request, obj, form, change)
        after = {field: getattr(obj, field) for field in ROLE_FIELDS}
        changed = {
            field: [before[field] if before else None, after[field]]
            for field in ROLE_FIELDS
            if before is None or before[field] != after[field]
        }
        if changed:
            audit_record(
                action="account.role_changed" if change else "account.created",
                actor=request.user,
                organisation=obj.organisation,
                target=obj,
                request=request,
                details={"username": obj.username, "changes": changed},
            )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Operators see who holds which tokens (never the keys, only their hashes are stored); owners revoke them."""

    list_display = (
        "name",
        "user",
        "key_prefix",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
    list_filter = ("revoked_at",)
    search_fields = ("name", "user__username")
    readonly_fields = (
        "user",
        "name",
        "key_hash",
        "key_prefix",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
