from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.federations.models import Federation, PrivacyLevel, PublicDataset
from market.outbox import OutboxEntry
from workers.modelio.families import DECLARED_FAMILIES

#: What a silo declares its models to be: the pure core's vocabulary (workers.modelio.families).
ModelFamily = models.TextChoices(
    "ModelFamily",
    [(family.name, (family.value, label)) for family, label in DECLARED_FAMILIES.items()],
)


class SubmissionStatus(models.TextChoices):
    PENDING = "pending", "Waiting for validation"
    VALIDATING = "validating", "Being validated"
    VALID = "valid", "Valid"
    REJECTED = "rejected", "Rejected"


class Submission(models.Model):
    """Student models a silo uploaded for a federation, with what the silo declares about them."""

    federation = models.ForeignKey(Federation, on_delete=models.PROTECT, related_name="submissions")
    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="submissions"
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    public_dataset = models.ForeignKey(
        PublicDataset,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The public data version the models were validated against.",
    )
    model_family = models.CharField(max_length=40, choices=ModelFamily.choices)
    n_local_examples = models.PositiveIntegerField()
    local_validation_score = models.FloatField()
    label_distribution = models.JSONField(null=True, blank=True)
    privacy_level = models.CharField(max_length=2, choices=PrivacyLevel.choices)
    privacy_parameters = models.JSONField(default=dict, blank=True)
    declared_epsilon = models.FloatField(null=True, blank=True)
    privacy_report = models.JSONField(
        null=True,
        blank=True,
        help_text="L2: the data-independent example-level ε the declared parameters imply.",
    )
    own_model_validation_score = models.FloatField(
        null=True,
        blank=True,
        help_text="Held-out accuracy the silo declared for its own model (the model file whose info role is "
        "'own'); null when the submission carries none.",
    )
    partitions = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="FedKT's s the silo trained with, as it declared it."
    )
    teachers = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="FedKT's t the silo trained with, as it declared it."
    )
    disjoint_partitions = models.BooleanField(
        default=False,
        help_text="Whether the silo declared that each student was fitted on its own partition of its rows, the "
        "partitions disjoint (the toolkit's construction; a record-level L1 job's sensitivity rests on it).",
    )
    content_sha256 = models.CharField(
        max_length=64, help_text="SHA-256 over the model files' hashes, in upload order."
    )
    status = models.CharField(
        max_length=20, choices=SubmissionStatus.choices, default=SubmissionStatus.PENDING
    )
    rejection_reason = models.TextField(blank=True)
    validated_by = models.CharField(
        max_length=200, blank=True, help_text="Worker host and process id."
    )
    validation_started_at = models.DateTimeField(null=True, blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)
    idempotency_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        help_text="The uploader's Idempotency-Key: the same key with the same files returns this submission.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="one_submission_per_idempotency_key",
            ),
            models.UniqueConstraint(
                fields=["federation", "organisation", "content_sha256"],
                name="no_duplicate_submission",
            ),
            models.CheckConstraint(
                condition=models.Q(local_validation_score__gte=0, local_validation_score__lte=1),
                name="validation_score_is_a_fraction",
            ),
            models.CheckConstraint(
                condition=models.Q(own_model_validation_score__isnull=True)
                | models.Q(own_model_validation_score__gte=0, own_model_validation_score__lte=1),
                name="own_model_score_is_a_fraction",
            ),
        ]

    def __str__(self):
        return f"Submission #{self.id} by {self.organisation} to {self.federation}"


#: ``ModelFile.info["role"]`` of the silo's own model (issue 31); every other file of a submission is a FedKT student
#: (or, for a local submission, its one model).
OWN_MODEL_ROLE = "own"


class ModelFile(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="model_files")
    position = models.PositiveSmallIntegerField()
    original_name = models.CharField(max_length=255)
    stored_name = models.CharField(max_length=500)
    format = models.CharField(max_length=40)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveBigIntegerField()
    info = models.JSONField(default=dict)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "position"], name="one_file_per_position")
        ]


class SubmissionOutbox(OutboxEntry):
    """A validation that must reach the broker (:mod:`market.outbox`): a submission uploaded while the broker is
    down is validated once it is back, once (the worker claims the submission row with a conditional UPDATE)."""

    task_name = "onefold.submission_validate"
    target_field = "submission_id"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="outbox")

    class Meta(OutboxEntry.Meta):
        indexes = [models.Index(fields=["published_at"], name="submissions_outbox_unpublished")]
