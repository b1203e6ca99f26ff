"""The Celery application; with workers/tasks.py the only part of workers/ that knows Django."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")

app = Celery("onefold")
app.config_from_object("django.conf:settings", namespace="CELERY")


def ensure_broker_folders() -> None:
    """The embedded filesystem broker needs its folders to exist before a message is sent."""
    for folder in (app.conf.broker_transport_options or {}).values():
        if isinstance(folder, str) and folder.startswith("/"):
            Path(folder).mkdir(parents=True, exist_ok=True)


ensure_broker_folders()
app.autodiscover_tasks(["workers"])
