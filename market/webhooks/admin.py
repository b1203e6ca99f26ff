from django.contrib import admin

from market.read_only_admin import ReadOnlyAdmin
from market.webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    list_display = ["id", "organisation", "url", "is_active", "consecutive_failures"]
    exclude = ["secret", "previous_secret"]  # shown once, at creation and rotation; never here

    def get_readonly_fields(self, request, obj=None):
        return [
            name for name in super().get_readonly_fields(request, obj) if name not in self.exclude
        ]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "endpoint", "event_type", "status", "attempts", "created_at"]
