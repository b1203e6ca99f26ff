from django.contrib import admin

from market.submissions.models import ModelFile, Submission


class ModelFileInline(admin.TabularInline):
    model = ModelFile
    extra = 0
    readonly_fields = ("position", "original_name", "format", "sha256", "size_bytes", "info")
    exclude = ("stored_name",)

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "federation",
        "organisation",
        "model_family",
        "privacy_level",
        "status",
        "created_at",
    )
    list_filter = ("status", "privacy_level", "model_family", "federation")
    readonly_fields = [field.name for field in Submission._meta.fields]
    inlines = [ModelFileInline]

    def has_add_permission(self, request):  # submissions arrive through the upload checks only
        return False
