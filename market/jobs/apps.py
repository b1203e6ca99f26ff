from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "market.jobs"
    label = "jobs"
