from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "market.notifications"
    label = "notifications"

    def ready(self):
        # A silo hears of a charge of its privacy budget from the ledger line's post_save: the ledger calls no one.
        from market.notifications import receivers  # noqa: F401
