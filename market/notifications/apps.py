from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "market.notifications"
    label = "notifications"
