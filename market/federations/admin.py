from django.contrib import admin

from market.federations.models import EvaluationSplit, Federation, Membership, PublicDataset


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Federation)
class FederationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "default_privacy_level", "created_at")
    search_fields = ("name", "slug")
    inlines = [MembershipInline]


@admin.register(PublicDataset)
class PublicDatasetAdmin(admin.ModelAdmin):
    list_display = (
        "federation",
        "content_sha256",
        "source_format",
        "n_rows",
        "n_features",
        "created_at",
    )
    readonly_fields = [field.name for field in PublicDataset._meta.fields]


@admin.register(EvaluationSplit)
class EvaluationSplitAdmin(admin.ModelAdmin):
    list_display = ("federation", "content_sha256", "n_rows", "created_at")
    readonly_fields = [field.name for field in EvaluationSplit._meta.fields]
