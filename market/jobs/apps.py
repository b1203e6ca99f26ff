from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "market.jobs"
    label = "jobs"

    def ready(self):
        # The outbox (market.outbox) publishes tasks by name, so every process that publishes must know them.
        import workers.tasks  # noqa: F401
