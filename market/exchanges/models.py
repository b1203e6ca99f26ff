"""Federated distillation as a market exchange: rounds in which silos upload per-label mean logits and download the
global per-label logits of the other silos (Jeong et al. 2018, *Federated Distillation and Augmentation*, FD,
Algorithm 1; the maths is :mod:`workers.algorithms.fd`)."""

from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.federations.models import Federation
from market.outbox import OutboxEntry


class ExchangeStatus(models.TextChoices):
    RUNNING = "running", "Running rounds"
    FINISHED = "finished", "Finished"


class RoundStatus(models.TextChoices):
    OPEN = "open", "Open for uploads"
    CLOSING = "closing", "Closed; global logits being computed"
    AGGREGATED = "aggregated", "Global logits ready"
    MISSED_QUORUM = "missed_quorum", "Missed its quorum"


class Exchange(models.Model):
    """An FD exchange in a federation: ``rounds`` rounds of ``round_seconds`` each; a round needs ``min_silos``."""

    federation = models.ForeignKey(Federation, on_delete=models.PROTECT, related_name="exchanges")
    name = models.CharField(max_length=200)
    rounds = models.PositiveSmallIntegerField()
    round_seconds = models.PositiveIntegerField()
    min_silos = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=20, choices=ExchangeStatus.choices, default=ExchangeStatus.RUNNING
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_silos__gte=2), name="exchange_needs_two_silos"
            )
        ]

    def __str__(self):
        return f"Exchange #{self.id} '{self.name}' in {self.federation}"


class ExchangeRound(models.Model):
    exchange = models.ForeignKey(Exchange, on_delete=models.CASCADE, related_name="exchange_rounds")
    number = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=20, choices=RoundStatus.choices, default=RoundStatus.OPEN)
    status_reason = models.TextField(blank=True)
    opens_at = models.DateTimeField()
    deadline = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["exchange_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["exchange", "number"], name="one_round_per_number")
        ]


class LogitUpload(models.Model):
    """One silo's per-label mean logits for one round, and (once aggregated) the global logits it downloads."""

    exchange_round = models.ForeignKey(
        ExchangeRound, on_delete=models.CASCADE, related_name="uploads"
    )
    organisation = models.ForeignKey(Organisation, on_delete=models.PROTECT, related_name="+")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    labels = models.JSONField(help_text="Class indices the silo declares it holds.")
    logits = models.JSONField(
        help_text="C × C: row ℓ is the mean logit vector on the silo's examples of label ℓ."
    )
    global_logits = models.JSONField(
        null=True, blank=True, help_text="C × C: the other silos' average, per label."
    )
    available = models.JSONField(
        null=True, blank=True, help_text="Per label: whether another silo held it."
    )
    payload_bits = models.PositiveIntegerField(help_text="C² numbers of 32 bits, each way.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["exchange_round_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["exchange_round", "organisation"], name="one_upload_per_round"
            )
        ]


class ExchangeRoundOutbox(OutboxEntry):
    """A closed round whose global logits a worker must compute (:mod:`market.outbox`)."""

    task_name = "onefold.exchange_round_aggregate"
    target_field = "exchange_round_id"

    exchange_round = models.ForeignKey(
        ExchangeRound, on_delete=models.CASCADE, related_name="outbox"
    )

    class Meta(OutboxEntry.Meta):
        indexes = [models.Index(fields=["published_at"], name="exchanges_outbox_unpublished")]
