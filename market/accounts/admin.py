from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from market.accounts.models import Organisation, User


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ("name", "is_silo", "is_buyer", "created_at")
    search_fields = ("name",)


@admin.register(User)
class OnefoldUserAdmin(UserAdmin):
    list_display = ("username", "organisation", "is_staff", "is_active")
    list_filter = ("is_staff", "organisation")
    fieldsets = UserAdmin.fieldsets + (("Onefold", {"fields": ("organisation",)}),)
