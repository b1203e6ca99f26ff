from django.conf import settings
from django.db import models


class AuditOutcome(models.TextChoices):
    SUCCESS = "success", "Succeeded"
    REFUSED = "refused", "Refused"
    FAILURE = "failure", "Failed"


class AuditEvent(models.Model):
    """One security-relevant event. Append-only and hash-chained: ``entry_hash`` covers this entry's fields
    and ``previous_hash``, so editing or deleting an entry breaks the chain."""

    created_at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    organisation = models.ForeignKey(
        # By name, not by import: accounts records audit events, so the audit trail imports no accounts code.
        "accounts.Organisation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    action = models.CharField(
        max_length=100, help_text="Dotted name, e.g. 'budget.limit_changed', 'purchase.created'."
    )
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=100, blank=True)
    outcome = models.CharField(max_length=20, choices=AuditOutcome.choices)
    client_address = models.GenericIPAddressField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    previous_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action} {self.outcome}"
