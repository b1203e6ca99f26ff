from django.apps import AppConfig


class CommerceConfig(AppConfig):
    name = "market.commerce"
    label = "commerce"
