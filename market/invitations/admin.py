from django.contrib import admin

from market.invitations.models import Invitation


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read-only: invitations are made and accepted in the app (their tokens are never stored)."""

    list_display = ("id", "kind", "organisation_label", "federation", "expires_at", "accepted_at")
    readonly_fields = [field.name for field in Invitation._meta.fields]

    def has_add_permission(self, request):
        return False
