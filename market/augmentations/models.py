"""Federated augmentation (FAug, Jeong et al. 2018, Section 3) as a market feature: silos upload seed samples of the
labels they lack (and redundant samples of others, to hide which), the market trains one conditional generator on
the pooled seeds, optionally with a DP-SGD discriminator, and publishes it to the federation's members (the maths is
:mod:`workers.algorithms.faug`)."""

from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.federations.models import Federation, PublicDataset
from market.outbox import OutboxEntry


class AugmentationStatus(models.TextChoices):
    COLLECTING = "collecting", "Collecting seeds"
    QUEUED = "queued", "Queued for training"
    TRAINING = "training", "Training the generator"
    PUBLISHED = "published", "Generator published"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class GeneratorKind(models.TextChoices):
    MLP_GAN = "mlp_gan", "MLP conditional GAN (published as safetensors; DP possible)"
    CTGAN = "ctgan", "CTGAN, tabular (published as generated samples; no DP)"


class Augmentation(models.Model):
    """One conditional generator to train on the seeds members upload. With ``private`` its discriminator is
    trained with DP-SGD (σ = ``noise_multiplier``, or solved for ``target_epsilon`` when training starts); the
    (ε, δ) is example-level with respect to the pooled seeds and charged to every contributing silo."""

    federation = models.ForeignKey(
        Federation, on_delete=models.PROTECT, related_name="augmentations"
    )
    name = models.CharField(max_length=200)
    generator = models.CharField(
        max_length=20,
        choices=GeneratorKind.choices,
        default=GeneratorKind.MLP_GAN,
        help_text="Which conditional generator the market trains.",
    )
    n_features = models.PositiveIntegerField(
        help_text="Features per seed sample (scaled to [0, 1] for the MLP GAN)."
    )
    epochs = models.PositiveIntegerField(help_text="Passes of the discriminator over the seeds.")
    batch_size = models.PositiveIntegerField()
    private = models.BooleanField(help_text="Whether the discriminator is trained with DP-SGD.")
    public_dataset = models.ForeignKey(
        PublicDataset,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The public data version the GAN pretrains on, unlabelled and at no ε, before the seeds "
        "(the federation's current one when the augmentation was opened with use_public_data).",
    )
    noise_multiplier = models.FloatField(null=True, blank=True)
    target_epsilon = models.FloatField(null=True, blank=True)
    max_grad_norm = models.FloatField(default=1.0)
    delta = models.FloatField(default=1e-5)
    status = models.CharField(
        max_length=20, choices=AugmentationStatus.choices, default=AugmentationStatus.COLLECTING
    )
    status_reason = models.TextField(blank=True)
    privacy_parameters = models.JSONField(
        null=True, blank=True, help_text="The DP-SGD run reserved at start (its declaration)."
    )
    privacy_report = models.JSONField(
        null=True, blank=True, help_text="Its example-level (ε, δ), reserved then charged."
    )
    generator_file = models.CharField(
        max_length=500,
        blank=True,
        help_text="The published file: the generator (safetensors) or, for a CTGAN, its samples (.npz).",
    )
    generator_spec = models.JSONField(null=True, blank=True)
    generator_bytes = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    training_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker claimed the training."
    )
    cancel_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an operator asked a training to stop; its worker stops at the next step.",
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"Augmentation #{self.id} '{self.name}' in {self.federation}"

    @property
    def publishes_samples(self) -> bool:
        """Whether it publishes generated samples (a CTGAN) rather than the generator (the MLP GAN)."""
        return self.generator == GeneratorKind.CTGAN

    @property
    def published_extension(self) -> str:
        """The published file's: a CTGAN's generated samples (npz) or the MLP GAN's generator (safetensors)."""
        return "npz" if self.publishes_samples else "safetensors"


class SeedUpload(models.Model):
    """One silo's seeds: samples of its target labels plus redundant samples of other labels, float32 rows."""

    augmentation = models.ForeignKey(Augmentation, on_delete=models.CASCADE, related_name="seeds")
    organisation = models.ForeignKey(Organisation, on_delete=models.PROTECT, related_name="+")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    target_labels = models.JSONField(help_text="Class indices the silo lacks.")
    labels = models.JSONField(help_text="One class index per seed row.")
    features = models.BinaryField(help_text="n_rows × n_features float32, row-major.")
    n_target = models.PositiveIntegerField()
    n_redundant = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["augmentation_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["augmentation", "organisation"], name="one_seed_upload_per_silo"
            )
        ]


class AugmentationOutbox(OutboxEntry):
    """A started augmentation whose generator a worker must train (:mod:`market.outbox`)."""

    task_name = "onefold.augmentation_train"
    target_field = "augmentation_id"

    augmentation = models.ForeignKey(Augmentation, on_delete=models.CASCADE, related_name="outbox")

    class Meta(OutboxEntry.Meta):
        indexes = [models.Index(fields=["published_at"], name="augmentations_outbox_unpub")]
