"""The worker entry point as a Django app (``INSTALLED_APPS``): once Django's apps are ready it loads the Celery
application and its tasks, so that every process that publishes work (a web process, a worker, beat) knows each
task by name. The market publishes through Celery's current application (market.outbox) and never imports the
entry point: only workers/tasks.py knows both sides."""

from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    label = "workers"
    verbose_name = "Worker entry point (Celery tasks)"

    def ready(self):
        import workers.tasks  # noqa: F401  (registers the tasks on workers.celery_app.app, Celery's current app)
