"""Notices to an organisation, shown on its pages (a list, and the unread count in the navigation) and sent by
e-mail to its members: that a job charged its privacy budget, that the budget passed 80 % or 100 %, that a sale
credited its revenue share. A notice without an organisation is for the market's operators: what waits for them
(a join request, a credit request, a failed job)."""

from django.db import models

from market.accounts.models import Organisation


class NotificationKind(models.TextChoices):
    BUDGET_CHARGED = "budget_charged", "Budget charged"
    BUDGET_THRESHOLD = "budget_threshold", "Budget threshold passed"
    SALE_CREDITED = "sale_credited", "Sale credited"
    JOIN_REQUEST = "join_request", "Join request waiting"
    CREDIT_REQUEST = "credit_request", "Credit request waiting"
    JOB_FAILED = "job_failed", "Job failed"
    USAGE_CHARGED = "usage_charged", "Metered use charged"
    USAGE_CAP_REACHED = "usage_cap_reached", "Monthly cap reached"


class Notification(models.Model):
    organisation = models.ForeignKey(
        Organisation,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notifications",
        help_text="Empty: a notice for the market's operators.",
    )
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    subject = models.CharField(max_length=200)
    message = models.TextField()
    link = models.CharField(max_length=300, blank=True, help_text="A path in the app to read more.")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["organisation", "read_at"], name="notification_unread"),
        ]

    def __str__(self):
        return f"{self.organisation or 'Operators'}: {self.subject}"
