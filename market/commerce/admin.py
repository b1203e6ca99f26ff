"""Read-only views of the market for operators: money moves only through the services (with their locks,
ledger entries and audit events), never by editing rows here."""

from django.contrib import admin

from market.commerce.models import Entitlement, Listing, Purchase, Wallet, WalletEntry
from market.read_only_admin import ReadOnlyAdmin


@admin.register(Listing)
class ListingAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "federation",
        "model_family",
        "privacy_level",
        "price_cents",
        "status",
        "published_at",
    )
    list_filter = ("status", "privacy_level", "model_family", "federation")
    search_fields = ("name", "description")


@admin.register(Wallet)
class WalletAdmin(ReadOnlyAdmin):
    list_display = ("id", "organisation", "is_market", "balance_cents", "updated_at")


@admin.register(WalletEntry)
class WalletEntryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "wallet",
        "kind",
        "amount_cents",
        "balance_after_cents",
        "reference",
        "purchase",
        "created_at",
    )
    list_filter = ("kind",)
    search_fields = ("reference",)


@admin.register(Purchase)
class PurchaseAdmin(ReadOnlyAdmin):
    list_display = ("id", "listing", "buyer_organisation", "price_cents", "fee_cents", "created_at")


@admin.register(Entitlement)
class EntitlementAdmin(ReadOnlyAdmin):
    list_display = ("id", "organisation", "global_model", "purchase", "created_at")
