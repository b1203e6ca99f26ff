"""Hand the rows that make webhook events to market.webhooks.events, in the transaction that saves them."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry
from market.jobs.models import Job
from market.webhooks.events import events_from_audit, events_from_budget_entry, events_from_job
from market.webhooks.services import webhook_events_emit


@receiver(post_save, sender=AuditEvent, dispatch_uid="webhooks-from-audit")
def audit_event_saved(sender, instance: AuditEvent, created: bool, **kwargs) -> None:
    if created:
        webhook_events_emit(events_from_audit(instance))


@receiver(post_save, sender=Job, dispatch_uid="webhooks-from-job")
def job_saved(sender, instance: Job, update_fields=None, **kwargs) -> None:
    # The runner and job_cancel end a job by saving its status with update_fields; other saves are not ends.
    if update_fields and "status" in update_fields:
        webhook_events_emit(events_from_job(instance))


@receiver(post_save, sender=BudgetEntry, dispatch_uid="webhooks-from-budget")
def budget_entry_saved(sender, instance: BudgetEntry, created: bool, **kwargs) -> None:
    if created:
        webhook_events_emit(events_from_budget_entry(instance))
