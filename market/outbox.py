"""Durable background work: a task that must reach the broker is first an outbox row, written in the transaction
of the change that needs it, published once that transaction commits, and swept periodically until published.
So work committed while the broker is down still runs once the broker is back, and never runs for a change that
rolled back. A duplicate delivery is harmless: every task claims its row with a conditional UPDATE first.

Each kind of work is a concrete subclass of :class:`OutboxEntry` (``JobOutbox``, ``SubmissionOutbox``) with a
foreign key to its row, the name of the Celery task that does the work and the field that task takes.
"""

import logging
from datetime import timedelta

from celery import current_app
from django.db import models, transaction
from django.db.models import Exists, Max, OuterRef, QuerySet
from django.utils import timezone

logger = logging.getLogger(__name__)


class OutboxEntry(models.Model):
    """One task message that must reach the broker; subclasses name the task and the row it works on."""

    task_name: str  # the Celery task, e.g. "onefold.job_start"; it takes the row's id
    target_field: str  # the foreign key's attribute holding that id, e.g. "job_id"

    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["created_at", "id"]


def outbox_add(entry: OutboxEntry) -> None:
    """Save ``entry`` in the caller's transaction and publish it once that transaction commits."""
    entry.save()
    transaction.on_commit(lambda: outbox_publish(entry_model=type(entry), entry_id=entry.id))


def outbox_publish(*, entry_model: type[OutboxEntry], entry_id: int) -> bool:
    """Send one row's task to the broker; a broker that is down leaves the row for the sweep."""
    entry = entry_model.objects.filter(id=entry_id, published_at__isnull=True).first()
    if entry is None:
        return False
    target_id = getattr(entry, entry_model.target_field)
    try:
        current_app.tasks[entry_model.task_name].apply_async((target_id,), retry=False)
    except Exception as error:  # any broker failure: the row stays and is swept later
        logger.warning(
            "Could not publish %s(%s) (outbox row %s): %s",
            entry_model.task_name,
            target_id,
            entry_id,
            error,
        )
        entry_model.objects.filter(id=entry_id).update(
            publish_attempts=entry.publish_attempts + 1, last_error=str(error)[:2000]
        )
        return False
    entry_model.objects.filter(id=entry_id).update(
        published_at=timezone.now(), publish_attempts=entry.publish_attempts + 1
    )
    return True


def task_send_later(task_name: str, target_id: int, *, countdown: float) -> bool:
    """Send ``task_name(target_id)`` to run in ``countdown`` seconds (a retry's backoff), by name like every task the
    market sends. No outbox row: the caller's own row is the durable record, swept by its reaper if this send is
    lost (the broker down, the message dropped)."""
    try:
        current_app.tasks[task_name].apply_async((target_id,), countdown=countdown, retry=False)
    except Exception as error:  # any broker failure: the caller's reaper sends it later
        logger.warning("Could not schedule %s(%s): %s", task_name, target_id, error)
        return False
    return True


def outbox_sweep(*, older_than_seconds: float = 0) -> int:
    """Publish every unpublished row of every outbox older than the given age (younger ones are still being
    published on commit); the number published."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    published = 0
    for entry_model in OutboxEntry.__subclasses__():
        for entry_id in entry_model.objects.filter(
            published_at__isnull=True, created_at__lte=cutoff
        ).values_list("id", flat=True):
            published += outbox_publish(entry_model=entry_model, entry_id=entry_id)
    return published


def outbox_published_long_ago(waiting: QuerySet, *, older_than_seconds: float) -> QuerySet:
    """Those of ``waiting`` (rows whose work is still to do, with an ``outbox`` relation) whose every message was
    published more than the given age ago: a broker that lost the message, or a worker that died with it."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    entry_model = waiting.model.outbox.rel.related_model
    unpublished = entry_model.objects.filter(
        **{entry_model.target_field: OuterRef("pk")}, published_at__isnull=True
    )
    return (
        waiting.filter(~Exists(unpublished))
        .annotate(last_published=Max("outbox__published_at"))
        .filter(last_published__lt=cutoff)
    )
