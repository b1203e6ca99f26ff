from django.conf import settings
from django.db import models

from market.accounts.models import Organisation


class PrivacyLevel(models.TextChoices):
    L0 = "L0", "L0: no noise (members trust each other)"
    L1 = "L1", "L1: server noise, party-level DP"
    L2 = "L2", "L2: party noise, example-level DP"


class MembershipPolicy(models.TextChoices):
    """Whether a silo may join a federation by itself (market.federations.membership)."""

    OPEN = "open", "Open: any silo may join"
    REQUEST = "request", "By request: the operator admits each silo"
    INVITATION = "invitation", "By invitation: only silos the operator invites"


class RevenueSplit(models.TextChoices):
    """How a sale's revenue is split among a model's silos (market.commerce.revenue.split_basis)."""

    AGREEMENT = "agreement", "By share of agreeing labels"
    VALUE = "value", "By contribution value (L0 models; negative values are paid nothing)"
    EQUAL = "equal", "Equally among the silos that took part"


def privacy_units_default() -> list[str]:
    """A federation's members accept party-level L1 only until an operator says otherwise: a record-level ε is a
    weaker promise (one row, not the silo's whole data) that rests on the silos' declaration that their students
    were fitted on disjoint partitions, so members who joined under the party-level promise must opt in."""
    return ["party"]


class Federation(models.Model):
    """One learning task: public data, feature specification, classes, privacy rules, members."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    class_labels = models.JSONField(
        help_text="Class labels as text, in the order of class indices 0…K-1."
    )
    label_column = models.CharField(max_length=200, default="label")
    allowed_privacy_levels = models.JSONField()
    default_privacy_level = models.CharField(max_length=2, choices=PrivacyLevel.choices)
    default_parameters = models.JSONField(default=dict, blank=True)
    default_epsilon_limit = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=10,
        help_text="ε limit of a new member's privacy budget.",
    )
    default_delta = models.DecimalField(
        max_digits=20,
        decimal_places=18,
        default="0.00001",
        help_text="δ of a new member's privacy budget.",
    )
    privacy_units = models.JSONField(
        default=privacy_units_default,
        help_text="What L1 jobs may protect, as the members accept: 'party' (one silo's whole data) and/or "
        "'record' (one record of one silo, example-level, resting on the silos' declared disjoint partitions).",
    )
    publish_data_dependent_epsilon = models.BooleanField(
        default=False,
        help_text="Whether data-dependent ε may be shown outside the operator's dashboard.",
    )
    publish_contributions = models.BooleanField(
        default=False, help_text="Whether model cards may reveal which silo contributed what."
    )
    buyers_may_launch_jobs = models.BooleanField(
        default=False, help_text="Whether buyers may create jobs."
    )
    accepts_own_models = models.BooleanField(
        default=True,
        help_text="Whether a silo's L0 submission may carry its own model on all its rows beside its FedKT students "
        "(used by L0 jobs' ensembles, distillation and silo baselines; never in a FedKT vote).",
    )
    fd_min_contributors = models.PositiveSmallIntegerField(
        default=2,
        help_text="Fewest other silos an FD exchange's per-label average may be made of (at least 2: an "
        "average of one silo is that silo's upload).",
    )
    membership_policy = models.CharField(
        max_length=20,
        choices=MembershipPolicy.choices,
        default=MembershipPolicy.REQUEST,
        help_text="Whether a silo may join by itself, asks the operator to be admitted, or must be invited.",
    )
    revenue_split = models.CharField(
        max_length=20,
        choices=RevenueSplit.choices,
        default=RevenueSplit.AGREEMENT,
        help_text="How a sale's revenue is split among the model's silos (docs/market.md); the value split "
        "applies to L0 models only, and an L1 or L2 model is split by agreement.",
    )
    members = models.ManyToManyField(Organisation, through="Membership", related_name="federations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(fd_min_contributors__gte=2),
                name="fd_average_of_two_silos_at_least",
            )
        ]

    def __str__(self):
        return self.name

    @property
    def n_classes(self) -> int:
        return len(self.class_labels)


class Membership(models.Model):
    federation = models.ForeignKey(Federation, on_delete=models.CASCADE)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["federation", "organisation"], name="one_membership")
        ]


class JoinRequestStatus(models.TextChoices):
    PENDING = "pending", "Waiting for the operator"
    ADMITTED = "admitted", "Admitted"
    REFUSED = "refused", "Refused"


class JoinRequest(models.Model):
    """A silo's request to join a federation whose policy is "by request"; the operator admits or refuses it.

    Decided requests are kept (who decided, when, why), so that the federation's membership history stays readable.
    """

    federation = models.ForeignKey(
        Federation, on_delete=models.CASCADE, related_name="join_requests"
    )
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="join_requests"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    status = models.CharField(
        max_length=20, choices=JoinRequestStatus.choices, default=JoinRequestStatus.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(
        max_length=500,
        blank=True,
        help_text="The operator's reason for a refusal, shown to the silo.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["federation", "organisation"],
                condition=models.Q(status="pending"),
                name="one_pending_join_request",
            )
        ]

    def __str__(self):
        return f"{self.organisation} → {self.federation} ({self.status})"


class PublicDataset(models.Model):
    """A version of a federation's public data: its encoded features and the specification that made them.

    The newest version is the current one. Labels, if the upload had any, are dropped and never stored.
    """

    federation = models.ForeignKey(
        Federation, on_delete=models.CASCADE, related_name="public_datasets"
    )
    content_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the uploaded file.")
    features_sha256 = models.CharField(
        max_length=64, help_text="SHA-256 of the encoded features NPZ."
    )
    features_file = models.CharField(
        max_length=500, help_text="Storage name of the encoded features NPZ."
    )
    feature_spec = models.JSONField()
    source_format = models.CharField(max_length=20)
    n_rows = models.PositiveIntegerField()
    n_features = models.PositiveIntegerField()
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["federation", "content_sha256"], name="one_public_dataset_per_content"
            )
        ]


class EvaluationSplit(models.Model):
    """Labelled data only the server sees, encoded with a public dataset's specification."""

    federation = models.ForeignKey(
        Federation, on_delete=models.CASCADE, related_name="evaluation_splits"
    )
    public_dataset = models.ForeignKey(PublicDataset, on_delete=models.PROTECT, related_name="+")
    content_sha256 = models.CharField(max_length=64)
    data_file = models.CharField(
        max_length=500, help_text="Storage name of the NPZ with arrays 'features' and 'labels'."
    )
    n_rows = models.PositiveIntegerField()
    class_counts = models.JSONField()
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["federation", "content_sha256"], name="one_evaluation_split_per_content"
            )
        ]
