import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.feature_views import global_model_feature_view
from market.federations.apis import attachment
from market.federations.models import PrivacyLevel
from market.federations.selectors import federation_get
from market.federations.visibility import visibility_for
from market.jobs.advice import estimate_advice
from market.jobs.baselines import baselines_visible
from market.jobs.models import JobStatus
from market.jobs.parameters import job_kind_choices, job_kind_refusal
from market.jobs.preflight import (
    MAX_DRAWS,
    job_estimate_create,
    job_estimate_get,
    job_estimate_progress,
)
from market.jobs.quality import launcher_statements
from market.jobs.selectors import global_model_get, job_get, job_list, job_log_lines, job_progress
from market.jobs.services import MAX_LAUNCH_REASON, EstimateOverride, job_cancel, job_create_once
from market.jobs.visibility import global_model_view
from market.json_input import CheckedJSONField


class JobKindField(serializers.ChoiceField):
    """A kind registered in the engine registry; any other value is refused with :func:`job_kind_refusal`."""

    def __init__(self, **kwargs):
        super().__init__(job_kind_choices(), **kwargs)

    def to_internal_value(self, data):
        if str(data) not in self.choice_strings_to_values:
            raise serializers.ValidationError(job_kind_refusal(data))
        return super().to_internal_value(data)


class EstimateOverrideInput(serializers.Serializer):
    """``launch_despite_estimate``: the operator's answer to a pre-flight estimate that expects the model to fail the
    publish gate (market.jobs.services.EstimateOverride)."""

    estimate = serializers.IntegerField(
        min_value=1, help_text="The id of this request's latest pre-flight estimate."
    )
    reason = serializers.CharField(
        max_length=MAX_LAUNCH_REASON,
        help_text="Why the job is launched anyway, in words: kept on the job, shown on its page and audited.",
    )

    def validate(self, attrs) -> EstimateOverride:
        return EstimateOverride(estimate_id=attrs["estimate"], reason=attrs["reason"])


class JobInput(serializers.Serializer):
    kind = JobKindField()
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    parameters = CheckedJSONField(
        required=False,
        default=dict,
        help_text='Per kind; omitted ones take their defaults, e.g. {"partitions": 2, '
        '"query_fraction": 0.1, "final_model": {"family": "random_forest"}}; '
        'queried rows are "query_fraction" (0 < f ≤ 1) or "query_count".',
    )
    submissions = CheckedJSONField(
        default="all", help_text='"all" valid submissions, or a list of ids.'
    )
    seed = serializers.IntegerField(required=False, allow_null=True, default=None)
    acknowledge_failed_estimate = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        help_text="The id of this request's failed pre-flight estimate, once you have read why it failed: without "
        "it such a launch is refused (400) with the estimate's reason.",
    )
    launch_despite_estimate = EstimateOverrideInput(
        required=False,
        allow_null=True,
        default=None,
        help_text='{"estimate": <id>, "reason": "<why>"}: where this request\'s latest pre-flight estimate expects '
        "its model to fail the publish gate, the launch is refused (400) with the gate's sentence and what to "
        "change until it names that estimate and says why it is launched anyway; the reason is kept on the job "
        "(launched_despite_estimate), shown on its page and written to the audit log.",
    )


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    kind = JobKindField()
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    parameters = serializers.DictField()
    seed = serializers.IntegerField()
    submissions = serializers.SerializerMethodField()
    status = serializers.ChoiceField(JobStatus.choices)
    progress = serializers.SerializerMethodField()
    log = serializers.SerializerMethodField()
    failure_reason = serializers.CharField()
    cancel_requested = serializers.BooleanField()
    privacy_bound = serializers.DictField(allow_null=True)
    estimates_before_launch = serializers.IntegerField(
        help_text="Pre-flight estimates asked in the federation since its previous job, before this one was launched."
    )
    launched_despite_estimate = serializers.SerializerMethodField(
        help_text='{"estimate": <id>, "reason": "..."} when the operator launched this job although its pre-flight '
        "estimate expected the model to fail the publish gate; else null."
    )
    attempts = serializers.IntegerField()
    requested_by = serializers.CharField(source="requested_by.username")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    global_model = serializers.SerializerMethodField()
    baselines = serializers.SerializerMethodField(
        help_text="The global model's baselines as the public sees them (null until it exists); the global model's "
        "own endpoint names the best single silo to those who may see it."
    )

    def get_submissions(self, job) -> list[int]:
        return sorted(job.submissions.values_list("id", flat=True))

    def get_progress(self, job) -> dict:
        return job_progress(job)

    def get_log(self, job) -> list[dict]:
        return [{**line, "at": line["at"].isoformat()} for line in job_log_lines(job)]

    def get_launched_despite_estimate(self, job) -> dict | None:
        if not job.launch_reason:
            return None
        return {"estimate": job.launched_despite_estimate_id, "reason": job.launch_reason}

    def get_global_model(self, job) -> int | None:
        return getattr(getattr(job, "global_model", None), "id", None)

    def get_baselines(self, job) -> dict | None:
        global_model = getattr(job, "global_model", None)
        if global_model is None:
            return None
        public = visibility_for(
            user=None, federation=job.federation
        )  # the public's rule (the card's)
        return baselines_visible(global_model, every_silo=public.every_silo, organisation_id=None)


class JobEstimateInput(JobInput):
    acknowledge_failed_estimate = None  # a launch's fields: an estimate launches nothing
    launch_despite_estimate = None
    draws = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text=f"L1: simulated draws of the job's noise, 1 to {MAX_DRAWS} (default 5); L2 always fuses once.",
    )


class JobEstimateOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    kind = JobKindField()
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    parameters = serializers.DictField()
    seed = serializers.IntegerField()
    submissions = serializers.ListField(child=serializers.IntegerField(), source="submission_ids")
    n_draws = serializers.IntegerField()
    status = serializers.CharField()
    progress = serializers.SerializerMethodField()
    failure_reason = serializers.CharField()
    result = serializers.DictField(
        allow_null=True,
        help_text='Once succeeded: "private" (mean, sd, min, max of accuracy and balanced_accuracy over the '
        'simulated draws), "draws", "reference" (the same fusion without noise: the L0 model; null at L2), '
        "\"candidates\" (at L1, the advisor's settings whose noise fits every member's remaining budget, each "
        'with its unit, mechanism, n_queries, privacy, epsilon, delta, parameters and metrics), "baselines" '
        '(majority_class, best_single_silo, average_silo, operator_only, n_silos; no silo at L1), "votes" '
        '("simulated" at L1: the silos\' votes are never read before the job spends; "members" at L2), '
        '"n_members", "report_rows".',
    )
    statements = serializers.SerializerMethodField(
        help_text='Once succeeded: "passes_gate", "gate" (the sentence when the model would fail the publish gate) '
        'and "silos" (each silo baseline it is expected to be below); market.jobs.quality.'
    )
    advice = serializers.SerializerMethodField(
        help_text='Once an L1 estimate succeeded (else null), the budget advisor (market.jobs.advice): "candidates" '
        '(result.candidates, each with "passes_gate" and "words"), "proposal" (the best candidate that passes the '
        'publish gate, or null: launch its "parameters"), "operator_only" and "l0" (the free models\' scores) '
        'and "statement", one sentence saying what to launch or that nothing private can beat the free model.'
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_advice(self, estimate) -> dict | None:
        return estimate_advice(
            result=estimate.result, class_labels=estimate.federation.class_labels or []
        )

    def get_progress(self, estimate) -> dict:
        return job_estimate_progress(estimate)

    def get_statements(self, estimate) -> dict | None:
        if estimate.result is None:
            return None
        return launcher_statements(
            result=estimate.result, class_labels=estimate.federation.class_labels or []
        )


class FederationJobEstimateListApi(APIView):
    @extend_schema(
        request=JobEstimateInput, responses={202: JobEstimateOutput, 200: JobEstimateOutput}
    )
    def post(self, request, slug):
        """Ask for a pre-flight estimate of an L1 or L2 job (operators only): the job's request as for launching it,
        checked the same way; nothing is launched or charged. 202 with the new estimate, or 200 with the same
        request's estimate that is still running or succeeded (header Idempotent-Replayed)."""
        given = JobEstimateInput(data=request.data)
        given.is_valid(raise_exception=True)
        created = job_estimate_create(
            federation=federation_get(slug=slug, user=request.user),
            requested_by=request.user,
            **given.validated_data,
        )
        response = Response(
            JobEstimateOutput(created.estimate).data,
            status=status.HTTP_200_OK if created.replayed else status.HTTP_202_ACCEPTED,
        )
        response["Idempotent-Replayed"] = "true" if created.replayed else "false"
        return response


class JobEstimateDetailApi(APIView):
    @extend_schema(responses=JobEstimateOutput)
    def get(self, request, estimate_id):
        """A pre-flight estimate, its progress and once done its scores (operators only)."""
        return Response(
            JobEstimateOutput(job_estimate_get(estimate_id=estimate_id, user=request.user)).data
        )


class GlobalModelFileOutput(serializers.Serializer):
    role = serializers.CharField()
    format = serializers.CharField()
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()


class GlobalModelOutput(serializers.Serializer):
    """Serialises a :class:`~market.jobs.visibility.GlobalModelView`: private fields come from the view only."""

    id = serializers.IntegerField(source="global_model.id")
    job = serializers.IntegerField(source="global_model.job_id")
    federation = serializers.SlugField(source="global_model.federation.slug")
    model_family = serializers.CharField(source="global_model.model_family")
    n_features = serializers.IntegerField(source="global_model.n_features")
    feature_view = serializers.SerializerMethodField(
        help_text="The view of the federation's features the model "
        'reads: "one_hot" or "ordinal" (docs/silo-guide.md).'
    )
    n_classes = serializers.IntegerField(source="global_model.n_classes")
    metrics = serializers.DictField()
    submission_metrics = serializers.DictField(
        help_text="Per submission; only the viewer's own unless the "
        "federation publishes contributions (operators: all)."
    )
    privacy_report = serializers.DictField(
        help_text="data_dependent is null unless the federation publishes it "
        "(operators: always shown)."
    )
    lineage = serializers.DictField()
    contribution_weights = serializers.DictField(
        help_text="Per organisation; only the viewer's own unless the "
        "federation publishes contributions (operators: all)."
    )
    contribution_rule = serializers.CharField()
    baselines = serializers.DictField(
        help_text="majority_class, best_single_silo, average_silo, operator_only (what the operator has without "
        "the silos: family, fit_rows, report_rows; null for models made before it) (accuracy, "
        "balanced_accuracy, macro_f1, roc_auc) and n_silos, all on the report half of the "
        "evaluation split. The silo baselines follow the contributions rule: "
        "exact to operators (and to all where contributions are published), "
        "else null with model_is_better and the comparison's verdict only (docs/market.md). majority_class, best_single_silo and operator_only carry "
        "'comparison': per metric the model's difference from it with a paired bootstrap's 95 % interval "
        "(difference, low, high) and a verdict (beats, level, below); comparison_method says how."
    )
    fusion_choice = serializers.DictField(
        allow_null=True,
        help_text=(
            'FedKT "vote": "auto" only (else null): the fusion chosen ("chosen"), by which "criterion", on how many '
            'evaluation rows ("selection_rows"; the metrics are on the other "report_rows"), and every candidate\'s '
            "selection-half scores (\"candidates\"; the stacked fusion's and the operator-only model's cross-fitted "
            'within that half); "silos_added_nothing": when auto chose "operator_only" (the final model fitted on '
            "the operator's evaluation rows alone), the sentence saying the silos added nothing, else null."
        ),
    )
    contribution_values = serializers.DictField(
        allow_null=True,
        help_text=(
            "Each silo's Shapley value of the job's own vote or average (docs/market.md, \"Contribution values\"): "
            "operators see every silo's; a silo of an L0 model its own value, standard error and rank band; "
            "everyone else, and everyone at L1 and L2 but the operator, an empty object."
        ),
    )
    files = GlobalModelFileOutput(source="global_model.files", many=True)
    created_at = serializers.DateTimeField(source="global_model.created_at")

    def get_feature_view(self, view) -> str:
        return global_model_feature_view(view.global_model)


class FederationJobListApi(APIView):
    @extend_schema(
        request=JobInput,
        responses={201: JobOutput},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
    )
    def post(self, request, slug):
        """Launch a job; a repeated Idempotency-Key with the same body returns the first job and reserves nothing
        again (header Idempotent-Replayed). Where the request's latest pre-flight estimate failed, or expects its
        model to fail the publish gate, the launch is refused (400, the sentence naming the field to set) until it
        answers that estimate: ``acknowledge_failed_estimate``, or ``launch_despite_estimate`` with a reason."""
        given = JobInput(data=request.data)
        given.is_valid(raise_exception=True)
        federation = federation_get(slug=slug, user=request.user)
        created = job_create_once(
            idempotency_key=request.headers.get("Idempotency-Key"),
            federation=federation,
            requested_by=request.user,
            request=request,
            **given.validated_data,
        )
        response = Response(
            JobOutput(job_get(job_id=created.job.id, user=request.user)).data,
            status=status.HTTP_201_CREATED,
        )
        response["Idempotent-Replayed"] = "true" if created.replayed else "false"
        return response

    @extend_schema(responses=JobOutput(many=True))
    def get(self, request, slug):
        return Response(
            JobOutput(job_list(user=request.user, federation_slug=slug)[:200], many=True).data
        )


class JobListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("federation", str, description="Only this federation's jobs.")
        ],
        responses=JobOutput(many=True),
    )
    def get(self, request):
        """Newest first, at most 200."""
        jobs = job_list(user=request.user, federation_slug=request.query_params.get("federation"))[
            :200
        ]
        return Response(JobOutput(jobs, many=True).data)


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutput)
    def get(self, request, job_id):
        return Response(JobOutput(job_get(job_id=job_id, user=request.user)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses=JobOutput)
    def post(self, request, job_id):
        job = job_cancel(
            job=job_get(job_id=job_id, user=request.user), user=request.user, request=request
        )
        return Response(JobOutput(job_get(job_id=job.id, user=request.user)).data)


class GlobalModelDetailApi(APIView):
    @extend_schema(responses=GlobalModelOutput)
    def get(self, request, global_model_id):
        global_model = global_model_get(global_model_id=global_model_id, user=request.user)
        return Response(
            GlobalModelOutput(global_model_view(global_model=global_model, user=request.user)).data
        )


class GlobalModelFeatureSpecApi(APIView):
    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request, global_model_id):
        """The feature specification the model reads (its job's public dataset): how a raw row becomes its
        encoded features, for whoever may see the model, its buyers included."""
        global_model = global_model_get(global_model_id=global_model_id, user=request.user)
        public_dataset = global_model.job.public_dataset
        return attachment(
            json.dumps(public_dataset.feature_spec, indent=2).encode(),
            content_type="application/json",
            filename=f"global-model-{global_model.id}-feature-spec-{public_dataset.content_sha256[:12]}.json",
        )
