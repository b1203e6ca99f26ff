from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "market.budgets"
    label = "budgets"
