from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from market.federations.models import PrivacyLevel
from market.federations.selectors import federation_get
from market.json_input import CheckedJSONField
from market.submissions.models import ModelFamily, SubmissionStatus
from market.submissions.selectors import submission_get, submission_list
from market.submissions.services import submission_create
from market.submissions.uploads import SubmissionUpload, UploadedModel
from workers.features import FEATURE_VIEWS, ONE_HOT_VIEW


class ModelFileOutput(serializers.Serializer):
    original_name = serializers.CharField()
    format = serializers.CharField()
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    info = serializers.DictField()


class SubmissionOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    organisation = serializers.CharField(source="organisation.name")
    model_family = serializers.ChoiceField(ModelFamily.choices)
    n_local_examples = serializers.IntegerField()
    local_validation_score = serializers.FloatField()
    label_distribution = serializers.ListField(child=serializers.IntegerField(), allow_null=True)
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    privacy_parameters = serializers.DictField()
    declared_epsilon = serializers.FloatField(allow_null=True)
    privacy_report = serializers.DictField(allow_null=True)
    own_model_validation_score = serializers.FloatField(allow_null=True)
    partitions = serializers.IntegerField(allow_null=True)
    teachers = serializers.IntegerField(allow_null=True)
    disjoint_partitions = serializers.BooleanField()
    status = serializers.ChoiceField(SubmissionStatus.choices)
    status_display = serializers.CharField(source="get_status_display")
    rejection_reason = serializers.CharField()
    content_sha256 = serializers.CharField()
    model_files = ModelFileOutput(many=True)
    created_at = serializers.DateTimeField()
    validated_at = serializers.DateTimeField(allow_null=True)


class SubmissionInput(serializers.Serializer):
    federation = serializers.SlugField()
    files = serializers.ListField(
        child=serializers.FileField(),
        min_length=1,
        help_text="ONNX, XGBoost JSON/UBJSON or safetensors files, recognised by content.",
    )
    model_family = serializers.ChoiceField(
        ModelFamily.choices,
        error_messages={
            "invalid_choice": f'"{{input}}" is not a model family Onefold knows; use one of {", ".join(ModelFamily.values)}.'
        },
    )
    n_local_examples = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1
    )  # the column's PositiveIntegerField
    local_validation_score = serializers.FloatField(min_value=0, max_value=1)
    label_distribution = CheckedJSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Example counts per class, e.g. [700, 300].",
    )
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    privacy_parameters = CheckedJSONField(
        required=False,
        default=dict,
        help_text='For L2: {"gamma" or "sigma", "delta", "partitions", "teachers", '
        '"queries"}, e.g. {"gamma": 0.04, "delta": 1e-5, '
        '"partitions": 2, "teachers": 5, "queries": 30}.',
    )
    declared_epsilon = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1_000_000,  # above every budget's limit (stored to 999,999.999999)
        error_messages={
            "max_value": "A declared ε above 1,000,000 exceeds every privacy budget; declare the ε your "
            "party-side noise spent."
        },
    )
    feature_view = serializers.ChoiceField(
        FEATURE_VIEWS,
        required=False,
        default=ONE_HOT_VIEW,
        help_text="The view of the federation's features the models read: "
        '"one_hot" (the default) or "ordinal" (tree families; see the '
        "silo guide).",
    )
    exchange = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=2**31 - 1,
        help_text="The FD exchange the network was trained through (`onefold fd` writes it); such a "
        "network learnt from other silos' noiseless logits and is accepted at L0 only.",
    )

    own_model_file = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=255,
        help_text="The name of the uploaded file that is your own model on all your rows (beside your FedKT "
        "students; L0 only, where the federation accepts own models). `onefold train` writes it.",
    )
    own_model_validation_score = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1,
        help_text="Your own model's accuracy on your held-out rows.",
    )
    partitions = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=64,
        help_text="FedKT's s you trained with: one student file per partition.",
    )
    teachers = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=64,
        help_text="FedKT's t you trained with: teachers per partition.",
    )
    disjoint_partitions = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Whether each student was fitted on its own partition of your rows, the partitions disjoint "
        "(the toolkit's --disjoint-partitions): a record-level L1 job counts each student's vote and charges "
        "your budget for one record moving one of them, so declare it only when it is true.",
    )

    def validate_label_distribution(self, value):
        if value is not None and not isinstance(value, list):
            raise serializers.ValidationError(
                "Give a JSON list of example counts per class, e.g. [700, 300]."
            )
        return value

    def validate_privacy_parameters(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError(
                'Give a JSON object, e.g. {"gamma": 0.04, "delta": 1e-5}.'
            )
        return value


class SubmissionPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class SubmissionListApi(APIView):
    parser_classes = [MultiPartParser]
    pagination_class = (
        SubmissionPagination  # read by the schema generator, which then documents the page envelope
    )

    @extend_schema(
        parameters=[
            OpenApiParameter("federation", str, description="Only this federation's submissions."),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses=SubmissionOutput(many=True),
    )
    def get(self, request):
        """Newest first, 50 a page (``limit`` up to 500, ``offset``); operators see every organisation's."""
        submissions = submission_list(
            user=request.user, federation_slug=request.query_params.get("federation")
        )
        paginator = SubmissionPagination()
        page = paginator.paginate_queryset(submissions, request, view=self)
        return paginator.get_paginated_response(SubmissionOutput(page, many=True).data)

    @extend_schema(
        request=SubmissionInput,
        responses={202: SubmissionOutput, 200: SubmissionOutput},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
    )
    def post(self, request):
        """Store the upload and accept it for validation (202): a worker validates it as soon as the broker has
        the message, even if the broker was down when the upload arrived; poll the submission for its status.
        A repeated Idempotency-Key with the same federation and files returns the first submission (200, header
        Idempotent-Replayed: true) and stores and charges nothing again; with other files it is refused (422)."""
        given = SubmissionInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        federation = federation_get(slug=fields.pop("federation"), user=request.user)
        models = [
            UploadedModel(name=upload.name, data=upload.read()) for upload in fields.pop("files")
        ]
        upload = SubmissionUpload(
            models=tuple(models), idempotency_key=request.headers.get("Idempotency-Key"), **fields
        )
        created = submission_create(federation=federation, user=request.user, upload=upload)
        submission = submission_get(submission_id=created.id, user=request.user)
        response = Response(
            SubmissionOutput(submission).data,
            status=status.HTTP_200_OK if created.replayed else status.HTTP_202_ACCEPTED,
        )
        response["Idempotent-Replayed"] = "true" if created.replayed else "false"
        return response


class SubmissionDetailApi(APIView):
    @extend_schema(responses=SubmissionOutput)
    def get(self, request, submission_id):
        return Response(
            SubmissionOutput(submission_get(submission_id=submission_id, user=request.user)).data
        )
