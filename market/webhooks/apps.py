from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "market.webhooks"
    label = "webhooks"

    def ready(self):
        # Events are derived where their change commits: from the audit chain, a job's end and a budget charge
        # (market.webhooks.events); the receivers only hand the saved row to that module.
        from market.webhooks import receivers  # noqa: F401
