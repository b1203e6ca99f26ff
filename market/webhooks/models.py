import uuid

from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.outbox import OutboxEntry


class WebhookEventType(models.TextChoices):
    SUBMISSION_VALIDATED = "submission.validated", "A submission passed validation"
    SUBMISSION_REJECTED = "submission.rejected", "A submission was rejected"
    JOB_SUCCEEDED = "job.succeeded", "A job made its global model"
    JOB_FAILED = "job.failed", "A job failed"
    JOB_CANCELLED = "job.cancelled", "A job was cancelled"
    MODEL_PUBLISHED = "model.published", "A model was published in the catalog"
    MODEL_RETIRED = "model.retired", "A model was retired from the catalog"
    PURCHASE_COMPLETED = "purchase.completed", "A purchase completed"
    SALE_CREDITED = "sale.credited", "A sale credited the organisation's revenue share"
    BUDGET_CHARGED = "budget.charged", "A privacy budget was charged"
    BUDGET_THRESHOLD_REACHED = "budget.threshold_reached", "A privacy budget reached 80 % or 100 %"
    PAYOUT_RECORDED = "payout.recorded", "A payout was recorded"
    USAGE_CHARGED = "usage.charged", "A metered prediction call was charged"
    USAGE_CAP_REACHED = "usage.cap_reached", "A plan's monthly cap of rows was reached"
    MEMBERSHIP_REQUESTED = "membership.requested", "A request to join a federation was made"
    MEMBERSHIP_CHANGED = "membership.changed", "A membership was granted, refused or removed"
    WEBHOOK_PING = "webhook.ping", "A test delivery a member asked for"


class WebhookEndpoint(models.Model):
    """An organisation's HTTPS receiver of the events it chose.

    The secret is kept as is, because the market needs it to sign every delivery (a hash could only check);
    it is shown once, at creation and at rotation, and never again by any page or API. A rotated-out secret
    still signs (as a second ``v1``) until ``previous_secret_expires_at``, so receivers can switch over."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list, help_text="The event types it receives.")
    description = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.TextField(blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.organisation} → {self.url}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Waiting for its next attempt"
    DELIVERING = "delivering", "Being delivered"
    SUCCEEDED = "succeeded", "Delivered"
    FAILED = "failed", "Gave up after every attempt"


class WebhookDispatch(models.Model):
    """The deliveries one committed change made (its events × the endpoints that receive them), sent by one task:
    one outbox row and one broker message per change instead of one per delivery; the worker fans them out."""

    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"webhook dispatch #{self.id}"


class WebhookDelivery(models.Model):
    """One event for one endpoint. A worker claims it (pending → delivering, with a lease) before each attempt,
    and only the claim's holder may record the outcome, so a delivery succeeds at most once."""

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    dispatch = models.ForeignKey(
        WebhookDispatch,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deliveries",
        help_text="The change's dispatch that sends its first attempt (none: queued alone).",
    )
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event_type = models.CharField(max_length=40, choices=WebhookEventType.choices)
    payload = models.JSONField(help_text="The body's ``data``: what the organisation may see.")
    status = models.CharField(
        max_length=20, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=100, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self):
        return f"{self.event_type} → endpoint #{self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery: the delivery log's line."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    latency_ms = models.PositiveIntegerField()
    response_status = models.PositiveIntegerField(null=True, blank=True)
    succeeded = models.BooleanField()
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="one_attempt_per_number"),
            models.UniqueConstraint(
                fields=["delivery"],
                condition=models.Q(succeeded=True),
                name="one_successful_attempt_per_delivery",
            ),
        ]


class WebhookOutbox(OutboxEntry):
    task_name = "onefold.webhook_deliver"
    target_field = "delivery_id"

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="outbox")


class WebhookDispatchOutbox(OutboxEntry):
    task_name = "onefold.webhook_dispatch"
    target_field = "dispatch_id"

    dispatch = models.ForeignKey(WebhookDispatch, on_delete=models.CASCADE, related_name="outbox")
