from django.contrib import admin

from market.notifications.models import Notification
from market.read_only_admin import ReadOnlyAdmin


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "organisation", "kind", "subject", "read_at")
    list_filter = ("kind",)
