from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "market.audit"
    label = "audit"
