"""The Celery application; with workers/tasks.py the only part of workers/ that knows Django."""

import os
from pathlib import Path

from celery import Celery, signals

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


@signals.task_prerun.connect
@signals.task_postrun.connect
def _connections_checked(sender=None, **_) -> None:
    """Around every task a worker runs, what Django does around every request: close the connections past
    CONN_MAX_AGE or left unusable by an error, keep the others (Celery's fix-up no longer closes them all:
    CELERY_DB_REUSE_MAX). Not around a task run eagerly, in its caller's transaction."""
    from django.db import close_old_connections

    if not getattr(getattr(sender, "request", None), "is_eager", False):
        close_old_connections()


app.autodiscover_tasks(["workers"])
