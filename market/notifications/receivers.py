"""Hand each new privacy-ledger line to market.notifications.services, in the transaction that writes it."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry
from market.notifications.services import budget_entry_notify, usage_audit_notify


@receiver(post_save, sender=BudgetEntry, dispatch_uid="notifications-from-budget")
def budget_entry_saved(sender, instance: BudgetEntry, created: bool, **kwargs) -> None:
    if created:
        budget_entry_notify(instance)


@receiver(post_save, sender=AuditEvent, dispatch_uid="notifications-from-usage")
def usage_audit_saved(sender, instance: AuditEvent, created: bool, **kwargs) -> None:
    if created and instance.action in ("usage.charged", "usage.cap_reached"):
        usage_audit_notify(instance)
