from django.apps import AppConfig


class FederationsConfig(AppConfig):
    name = "market.federations"
    label = "federations"
