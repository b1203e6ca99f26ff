"""Read-only views of jobs for operators: jobs change only through the services and the workers' claims (with
their leases, budget ledger entries and audit events), never by editing rows here."""

from django.contrib import admin

from market.jobs.models import GlobalModel, GlobalModelFile, Job, JobChunk, JobLogEntry, JobOutbox
from market.read_only_admin import ReadOnlyAdmin


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "federation",
        "kind",
        "privacy_level",
        "status",
        "progress_stage",
        "attempts",
        "worker",
        "lease_expires_at",
        "created_at",
    )
    list_filter = ("status", "kind", "privacy_level", "federation")


@admin.register(JobChunk)
class JobChunkAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "job",
        "index",
        "status",
        "members_done",
        "worker",
        "attempts",
        "finished_at",
    )
    list_filter = ("status",)


@admin.register(JobLogEntry)
class JobLogEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "created_at", "level", "message")
    list_filter = ("level",)


@admin.register(JobOutbox)
class JobOutboxAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "created_at", "published_at", "publish_attempts", "last_error")


@admin.register(GlobalModel)
class GlobalModelAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "job",
        "federation",
        "model_family",
        "n_features",
        "n_classes",
        "created_at",
    )
    list_filter = ("model_family", "federation")


@admin.register(GlobalModelFile)
class GlobalModelFileAdmin(ReadOnlyAdmin):
    list_display = ("id", "global_model", "role", "format", "size_bytes", "sha256")
