from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.federations.models import EvaluationSplit, Federation, PrivacyLevel, PublicDataset
from market.jobs.parameters import job_kind_choices
from market.outbox import OutboxEntry
from market.submissions.models import Submission


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class JobPhase(models.TextChoices):
    PREDICTING = "predicting", "Members predict the public data"
    FUSING = "fusing", "Fusing, evaluating and saving"


class Job(models.Model):
    """A request to fuse validated submissions into one global model. This row, not the broker, is the truth."""

    federation = models.ForeignKey(Federation, on_delete=models.PROTECT, related_name="jobs")
    kind = models.CharField(
        max_length=20,
        choices=job_kind_choices,
        help_text="A kind registered in the engine registry (workers.algorithms.registry), which owns them.",
    )
    privacy_level = models.CharField(max_length=2, choices=PrivacyLevel.choices)
    parameters = models.JSONField(
        default=dict, help_text="Validated parameters of the kind, defaults filled in."
    )
    seed = models.BigIntegerField(
        help_text="Seed of every non-DP random choice; DP noise is never seeded."
    )
    submissions = models.ManyToManyField(Submission, related_name="jobs")
    public_dataset = models.ForeignKey(PublicDataset, on_delete=models.PROTECT, related_name="+")
    evaluation_split = models.ForeignKey(
        EvaluationSplit, on_delete=models.PROTECT, related_name="+"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requesting_organisation = models.ForeignKey(
        Organisation, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    status = models.CharField(max_length=20, choices=JobStatus.choices, default=JobStatus.QUEUED)
    failure_reason = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    progress_stage = models.CharField(max_length=100, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    privacy_bound = models.JSONField(
        null=True,
        blank=True,
        help_text="L1: the data-independent bound reserved for every participating silo.",
    )
    estimates_before_launch = models.PositiveIntegerField(
        default=0,
        help_text="Pre-flight estimates asked in the federation since its previous job was launched, up to this "
        "one's launch (issue 38): how many estimates the choice of this job's parameters could have read.",
    )
    launched_despite_estimate = models.ForeignKey(
        "JobEstimate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The pre-flight estimate of this request that expected its model to fail the publish gate, "
        "which the operator launched it despite (issue 43); null for every other job.",
    )
    launch_reason = models.TextField(
        blank=True,
        help_text="Why the operator launched despite that estimate, as written at launch (audited as "
        "job.launched_despite_estimate).",
    )
    worker = models.CharField(
        max_length=200, blank=True, help_text="Host and process id of the worker holding the lease."
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    phase = models.CharField(
        max_length=20,
        choices=JobPhase.choices,
        blank=True,
        help_text="Which step the lease holder is in; the reaper resumes from here.",
    )
    noisy_answers_name = models.CharField(
        max_length=500,
        blank=True,
        help_text="L1: storage name of the noisy vote counts, once drawn (reused on retry).",
    )
    noise_drawn_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The release step (issue 45): when something derived from the votes first left the worker (the "
        "fusion's report lines, then the global model). An L1 job that ends before it is charged nothing.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress_done__lte=models.F("progress_total")),
                name="progress_within_total",
            ),
        ]

    def __str__(self):
        return f"Job #{self.id} ({self.kind}, {self.privacy_level}) in {self.federation}"


class GlobalModel(models.Model):
    """What a succeeded job produced: files, platform-measured metrics, privacy report, lineage, contributions.

    ``metrics`` (and each value of ``submission_metrics``): {"accuracy", "balanced_accuracy", "macro_f1",
    "roc_auc", "confusion_matrix": [[int]], "reliability": {"bin_edges", "confidence", "accuracy", "count"}},
    measured on ``job.evaluation_split``. ``contribution_weights``: {"<organisation id>": weight}, weights ≥ 0
    summing to 1, by the rule named in ``contribution_rule``.
    """

    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="global_model")
    federation = models.ForeignKey(
        Federation, on_delete=models.PROTECT, related_name="global_models"
    )
    model_family = models.CharField(
        max_length=40, help_text="The learner of the final model, or 'ensemble'."
    )
    n_features = models.PositiveIntegerField()
    n_classes = models.PositiveIntegerField()
    metrics = models.JSONField()
    submission_metrics = models.JSONField(
        help_text='{"<submission id>": metrics}, same keys as metrics.'
    )
    privacy_report = models.JSONField(
        help_text="data_independent and data_dependent kept apart, each labelled."
    )
    lineage = models.JSONField(help_text="Job, submissions, public-data hash, code version, seeds.")
    contribution_weights = models.JSONField()
    contribution_rule = models.TextField()
    baselines = models.JSONField(
        null=True,
        blank=True,
        help_text=(
            "What a buyer could have without the federation, on the same evaluation split (workers.metrics."
            "baselines): majority_class, best_single_silo (with its organisation id as 'silo'), average_silo, "
            "n_silos. Null for models made before baselines were measured (market.jobs.baselines derives them)."
        ),
    )
    contribution_values = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "Each silo's Shapley value of the fusion's own vote or average (workers.valuation."
            "contribution_values): the game, the estimator and per organisation id its values, standard errors, "
            "leave-one-out and rank. Empty for kinds without a vote or an average and for older models. Who sees "
            "it: market.jobs.visibility."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"Global model of job #{self.job_id}"


class GlobalModelFile(models.Model):
    """One downloadable form of a global model. ``format``: an ArtifactFormat (workers.modelio.base), e.g. bundle
    (a zip of member files and manifest.json for ensembles). ``role``: native (the safe format of the model
    family) or portable (ONNX, runnable with onnxruntime alone)."""

    global_model = models.ForeignKey(GlobalModel, on_delete=models.CASCADE, related_name="files")
    role = models.CharField(
        max_length=20, choices=[("native", "Native safe format"), ("portable", "ONNX")]
    )
    format = models.CharField(max_length=40)
    stored_name = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveBigIntegerField()

    class Meta:
        ordering = ["role", "format"]
        constraints = [
            models.UniqueConstraint(fields=["global_model", "format"], name="one_file_per_format")
        ]


class ChunkStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class JobChunk(models.Model):
    """A slice of a job's submissions predicted by one task; its partial sums live in storage (``artifact_name``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    submission_ids = models.JSONField(
        help_text="Submission ids of this chunk, in the job's member order."
    )
    status = models.CharField(
        max_length=20, choices=ChunkStatus.choices, default=ChunkStatus.PENDING
    )
    members_done = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    artifact_name = models.CharField(max_length=500, blank=True)
    member_metrics = models.JSONField(
        default=dict, help_text='{"<submission id>": metrics on the evaluation split}.'
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="one_chunk_per_index")]


class JobLogEntry(models.Model):
    """One line of a job's log, shown by the API and the job page."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_entries")
    created_at = models.DateTimeField(auto_now_add=True)
    level = models.CharField(max_length=10, default="info")
    message = models.TextField()

    class Meta:
        ordering = ["created_at", "id"]


class JobIdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` for a job creation: the same key from the same person with the same request
    returns the first job, and reserves no budget again (a toolkit retrying a request that timed out)."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=200)
    request_sha256 = models.CharField(
        max_length=64, help_text="SHA-256 of the request: federation and body."
    )
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "key"], name="one_job_per_idempotency_key"
            )
        ]


class JobOutbox(OutboxEntry):
    """A job start that must reach the broker (:mod:`market.outbox`): a job committed while the broker is down
    still runs, once (the worker claims the job row with a conditional UPDATE)."""

    task_name = "onefold.job_start"
    target_field = "job_id"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="outbox")

    class Meta(OutboxEntry.Meta):
        indexes = [models.Index(fields=["published_at"], name="jobs_outbox_unpublished")]


class EstimateStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class JobEstimate(models.Model):
    """A pre-flight estimate of an L1 or L2 job before it is launched (market.jobs.preflight): the members' fusion
    scored on the evaluation split, at L1 with several simulated draws of the job's noise. Nothing of it is
    published or charged; only operators see it (market.jobs.visibility). Its fields mirror a job's, so that the
    job runner's prediction step reads either.

    ``result``: {"private": {"accuracy"|"balanced_accuracy": {"mean", "sd", "min", "max"}}, "draws": [headline
    metrics of each simulated draw], "reference": headline metrics of the same fusion without noise (L1; null at
    L2), "baselines": market.jobs.baselines' measurement on the same rows, "n_members", "report_rows"}.
    """

    federation = models.ForeignKey(Federation, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=20, choices=job_kind_choices)
    privacy_level = models.CharField(max_length=2, choices=PrivacyLevel.choices)
    parameters = models.JSONField(help_text="The job's validated parameters, defaults filled in.")
    seed = models.BigIntegerField(
        help_text="The job's seed, and the seed of the simulated noise draws (never of real DP noise)."
    )
    submission_ids = models.JSONField(help_text="The members the job would use, by id.")
    n_draws = models.PositiveSmallIntegerField(
        help_text="Simulated noise draws (L1); 1 at L2, whose members carry their own noise."
    )
    public_dataset = models.ForeignKey(PublicDataset, on_delete=models.PROTECT, related_name="+")
    evaluation_split = models.ForeignKey(
        EvaluationSplit, on_delete=models.PROTECT, related_name="+"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    request_sha256 = models.CharField(
        max_length=64,
        db_index=True,
        help_text="SHA-256 of what the estimate is of (federation, kind, level, parameters, members, seed "
        "given, data): the same request again reads this estimate instead of starting another.",
    )
    status = models.CharField(
        max_length=20, choices=EstimateStatus.choices, default=EstimateStatus.QUEUED
    )
    progress_stage = models.CharField(max_length=100, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    failure_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress_done__lte=models.F("progress_total")),
                name="estimate_progress_within_total",
            ),
        ]

    def __str__(self):
        return f"Estimate #{self.id} ({self.kind}, {self.privacy_level}) in {self.federation}"


class JobEstimateOutbox(OutboxEntry):
    """An estimate that must reach the broker (:mod:`market.outbox`); the worker claims the estimate row first."""

    task_name = "onefold.job_estimate"
    target_field = "estimate_id"

    estimate = models.ForeignKey(JobEstimate, on_delete=models.CASCADE, related_name="outbox")

    class Meta(OutboxEntry.Meta):
        indexes = [models.Index(fields=["published_at"], name="estimates_outbox_unpublished")]
