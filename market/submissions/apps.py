from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "market.submissions"
    label = "submissions"
