"""The Celery application; with workers/tasks.py the only part of workers/ that knows Django."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")

app = Celery("onefold")
app.config_from_object("django.conf:settings", namespace="CELERY")


def ensure_broker_folders() -> None:
    """The embedded filesystem broker needs its folders to exist before a message is sent (and beat its own)."""
    for folder in (app.conf.broker_transport_options or {}).values():
        if isinstance(folder, str) and folder.startswith("/"):
            Path(folder).mkdir(parents=True, exist_ok=True)
    if app.conf.beat_schedule_filename and app.conf.beat_schedule_filename.startswith("/"):
        Path(app.conf.beat_schedule_filename).parent.mkdir(parents=True, exist_ok=True)


ensure_broker_folders()


def _reaper_interval() -> float:
    from django.conf import settings

    return float(settings.ONEFOLD_JOB_REAPER_SECONDS)


# The reapers and the outbox sweep: run `celery -A workers.celery_app beat` once per deployment (or `worker -B`
# with one worker).
app.conf.beat_schedule = {
    name: {"task": task, "schedule": _reaper_interval()}
    for name, task in (
        ("job-reaper", "onefold.job_reap"),
        ("submission-reaper", "onefold.submission_reap"),
        ("outbox-sweep", "onefold.outbox_sweep"),
        ("exchange-reaper", "onefold.exchange_reap"),
        ("augmentation-reaper", "onefold.augmentation_reap"),
        ("webhook-reaper", "onefold.webhook_reap"),
    )
}
app.autodiscover_tasks(["workers"])
