from django.apps import AppConfig


class ExchangesConfig(AppConfig):
    name = "market.exchanges"
    label = "exchanges"
