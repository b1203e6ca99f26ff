"""Hand each new privacy-ledger line and audit entry, and each job that ends failed, to
market.notifications.services, in the transaction that writes it."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry
from market.jobs.models import Job, JobStatus
from market.notifications.services import (
    audit_event_notify,
    budget_entry_notify,
    job_failed_notify,
)


@receiver(post_save, sender=BudgetEntry, dispatch_uid="notifications-from-budget")
def budget_entry_saved(sender, instance: BudgetEntry, created: bool, **kwargs) -> None:
    if created:
        budget_entry_notify(instance)


@receiver(post_save, sender=AuditEvent, dispatch_uid="notifications-from-audit")
def audit_event_saved(sender, instance: AuditEvent, created: bool, **kwargs) -> None:
    if created:
        audit_event_notify(instance)


@receiver(post_save, sender=Job, dispatch_uid="notifications-from-job")
def job_saved(sender, instance: Job, update_fields=None, **kwargs) -> None:
    # The runner ends a job by saving its status with update_fields (as market.webhooks.receivers reads it).
    if update_fields and "status" in update_fields and instance.status == JobStatus.FAILED:
        job_failed_notify(instance)
