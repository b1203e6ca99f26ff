import io
import json
import zipfile

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from market.errors import InvalidInput
from market.federations.membership import (
    federation_join,
    join_request_admit,
    join_request_refuse,
    membership_remove,
)
from market.federations.models import (
    JoinRequestStatus,
    MembershipPolicy,
    PrivacyLevel,
    RevenueSplit,
)
from market.federations.selectors import (
    evaluation_split_current,
    federation_get,
    federation_list,
    federation_require_member,
    join_request_list,
    member_list,
    public_dataset_current,
    require_operator,
)
from market.federations.services import (
    evaluation_split_upload,
    federation_create,
    federation_update,
    public_dataset_upload,
)
from market.storage import artifact_read
from workers.privacy.settings import PRIVACY_UNITS
from workers.silo.folders import pulled_files, pulled_folder_name


class FederationOutput(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    description = serializers.CharField()
    class_labels = serializers.ListField(child=serializers.CharField())
    label_column = serializers.CharField()
    allowed_privacy_levels = serializers.ListField(
        child=serializers.ChoiceField(PrivacyLevel.choices)
    )
    default_privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    default_parameters = serializers.DictField()
    accepts_own_models = serializers.BooleanField(
        help_text="Whether an L0 submission may carry the silo's own model beside its FedKT students."
    )
    membership_policy = serializers.ChoiceField(MembershipPolicy.choices)
    revenue_split = serializers.ChoiceField(
        RevenueSplit.choices,
        help_text="How a sale's revenue is split among the model's silos: agreement, value (L0 models) or equal.",
    )
    privacy_units = serializers.ListField(
        child=serializers.ChoiceField(PRIVACY_UNITS),
        help_text="What L1 jobs may protect, as the members accept: party (one silo's whole data), record (one "
        "record, example-level).",
    )
    is_member = serializers.BooleanField()
    join_requested = serializers.BooleanField(
        help_text="Whether your organisation's request to join waits for an operator."
    )
    created_at = serializers.DateTimeField()


class FederationEditInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(allow_blank=True, required=False)
    membership_policy = serializers.ChoiceField(MembershipPolicy.choices, required=False)
    revenue_split = serializers.ChoiceField(
        RevenueSplit.choices,
        required=False,
        help_text="How later sales are split among the silos (sales already made stay as paid).",
    )
    privacy_units = serializers.ListField(
        child=serializers.ChoiceField(PRIVACY_UNITS),
        min_length=1,
        required=False,
        help_text="What later L1 jobs may protect: party and/or record (jobs already charged stay as charged).",
    )


class JoinRequestOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    organisation = serializers.CharField(source="organisation.name")
    organisation_id = serializers.IntegerField()
    requested_by = serializers.CharField(source="requested_by.username")
    status = serializers.ChoiceField(JoinRequestStatus.choices)
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class JoinRefusalInput(serializers.Serializer):
    reason = serializers.CharField(
        max_length=500, allow_blank=True, default="", help_text="Shown to the silo."
    )


class MemberOutput(serializers.Serializer):
    organisation_id = serializers.IntegerField()
    organisation = serializers.CharField(source="organisation.name")
    joined_at = serializers.DateTimeField()


class FederationInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, default="")
    class_labels = serializers.ListField(
        child=serializers.CharField(max_length=200), min_length=2, max_length=10_000
    )
    label_column = serializers.CharField(max_length=200, default="label")
    allowed_privacy_levels = serializers.ListField(
        child=serializers.ChoiceField(PrivacyLevel.choices), min_length=1
    )
    default_privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    default_parameters = serializers.DictField(default=dict)
    membership_policy = serializers.ChoiceField(
        MembershipPolicy.choices,
        default=MembershipPolicy.REQUEST,
        help_text="Whether a silo may join by itself, asks to be admitted, or must be invited.",
    )
    privacy_units = serializers.ListField(
        child=serializers.ChoiceField(PRIVACY_UNITS),
        min_length=1,
        required=False,
        help_text="What L1 jobs may protect (default party only): party (one silo's whole data) and/or record "
        "(one record, example-level, resting on the silos' declared disjoint partitions).",
    )


class UploadInput(serializers.Serializer):
    file = serializers.FileField(
        help_text="CSV, Parquet or NPZ; the format is read from the content."
    )


class PublicDatasetOutput(serializers.Serializer):
    content_sha256 = serializers.CharField()
    features_sha256 = serializers.CharField()
    source_format = serializers.CharField()
    n_rows = serializers.IntegerField()
    n_features = serializers.IntegerField()
    feature_spec = serializers.DictField()
    created_at = serializers.DateTimeField()


class EvaluationSplitOutput(serializers.Serializer):
    content_sha256 = serializers.CharField()
    n_rows = serializers.IntegerField()
    class_counts = serializers.ListField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField()


def uploaded_bytes(request) -> bytes:
    upload = UploadInput(data=request.data)
    upload.is_valid(raise_exception=True)
    return upload.validated_data["file"].read()


class FederationListApi(APIView):
    @extend_schema(responses=FederationOutput(many=True))
    def get(self, request):
        return Response(FederationOutput(federation_list(user=request.user), many=True).data)

    @extend_schema(request=FederationInput, responses={201: FederationOutput})
    def post(self, request):
        given = FederationInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        policies = {"membership_policy": fields.pop("membership_policy")}
        if "privacy_units" in fields:
            policies["privacy_units"] = fields.pop("privacy_units")
        federation = federation_create(
            **fields,
            policies=policies,
            created_by=request.user,
            request=request,
        )
        federation = federation_get(slug=federation.slug, user=request.user)
        return Response(FederationOutput(federation).data, status=status.HTTP_201_CREATED)


class FederationDetailApi(APIView):
    @extend_schema(responses=FederationOutput)
    def get(self, request, slug):
        return Response(FederationOutput(federation_get(slug=slug, user=request.user)).data)

    @extend_schema(request=FederationEditInput, responses=FederationOutput)
    def patch(self, request, slug):
        """Operators: change the name, description, membership policy or revenue split policy (later sales); the
        slug stays."""
        federation = federation_get(slug=slug, user=request.user)
        require_operator(request.user, "edit federations")
        given = FederationEditInput(data=request.data)
        given.is_valid(raise_exception=True)
        fixed = sorted(set(request.data) - set(FederationEditInput().fields))
        if fixed:  # never a silent 200 for a change that was not made
            raise InvalidInput(
                f"{', '.join(repr(name) for name in fixed)} cannot be changed once a federation exists; a PATCH "
                f"may change only {', '.join(FederationEditInput().fields)}."
            )
        federation_update(
            federation=federation, user=request.user, request=request, **given.validated_data
        )
        return Response(FederationOutput(federation_get(slug=slug, user=request.user)).data)


class FederationJoinApi(APIView):
    """Join (an open federation: 201), ask to join (by request: 202, the request waits for an operator), or be
    told that the federation admits by invitation only (403). Asking again changes nothing (200)."""

    @extend_schema(
        request=None,
        responses={200: FederationOutput, 201: FederationOutput, 202: FederationOutput},
    )
    def post(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        outcome = federation_join(federation=federation, user=request.user, request=request)
        federation = federation_get(slug=slug, user=request.user)
        if not outcome.created:
            answer = status.HTTP_200_OK
        else:
            answer = status.HTTP_201_CREATED if outcome.membership else status.HTTP_202_ACCEPTED
        return Response(FederationOutput(federation).data, status=answer)


class JoinRequestListApi(APIView):
    """Operators: the federation's join requests, pending first, then the decided ones, newest first."""

    @extend_schema(responses=JoinRequestOutput(many=True))
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        return Response(
            JoinRequestOutput(
                join_request_list(federation=federation, user=request.user), many=True
            ).data
        )


class JoinRequestAdmitApi(APIView):
    @extend_schema(request=None, responses=JoinRequestOutput)
    def post(self, request, join_request_id: int):
        join_request = join_request_admit(
            join_request_id=join_request_id, user=request.user, request=request
        )
        return Response(JoinRequestOutput(join_request).data)


class JoinRequestRefuseApi(APIView):
    @extend_schema(request=JoinRefusalInput, responses=JoinRequestOutput)
    def post(self, request, join_request_id: int):
        given = JoinRefusalInput(data=request.data)
        given.is_valid(raise_exception=True)
        join_request = join_request_refuse(
            join_request_id=join_request_id,
            user=request.user,
            reason=given.validated_data["reason"],
            request=request,
        )
        return Response(JoinRequestOutput(join_request).data)


class MemberListApi(APIView):
    """Operators: the federation's member organisations, by name."""

    @extend_schema(responses=MemberOutput(many=True))
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        return Response(
            MemberOutput(member_list(federation=federation, user=request.user), many=True).data
        )


class MemberRemoveApi(APIView):
    """Operators: remove a member. Its submissions, jobs, budget and ledger stay (docs/market.md); it can no
    longer upload or be chosen for a new job."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request, slug, organisation_id: int):
        federation = federation_get(slug=slug, user=request.user)
        membership_remove(
            federation=federation,
            organisation_id=organisation_id,
            user=request.user,
            request=request,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class PublicDatasetApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(responses=PublicDatasetOutput)
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        federation_require_member(federation=federation, user=request.user)
        return Response(PublicDatasetOutput(public_dataset_current(federation=federation)).data)

    @extend_schema(request=UploadInput, responses={201: PublicDatasetOutput})
    def post(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        public_dataset = public_dataset_upload(
            federation=federation,
            data=uploaded_bytes(request),
            uploaded_by=request.user,
            request=request,
        )
        return Response(PublicDatasetOutput(public_dataset).data, status=status.HTTP_201_CREATED)


def attachment(content: bytes, *, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class PublicFeaturesDownloadApi(APIView):
    @extend_schema(
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
        description="The encoded public features: an NPZ with one float32 array 'features'.",
    )
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        federation_require_member(federation=federation, user=request.user)
        public_dataset = public_dataset_current(federation=federation)
        return attachment(
            artifact_read(public_dataset.features_file),
            content_type="application/octet-stream",
            filename=f"{slug}-public-features-{public_dataset.content_sha256[:12]}.npz",
        )


class FeatureSpecDownloadApi(APIView):
    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        federation_require_member(
            federation=federation,
            user=request.user,
            advice=" A buyer reads the feature specification of a model it bought at "
            "/api/global-models/<id>/feature-spec.json.",
        )
        public_dataset = public_dataset_current(federation=federation)
        return attachment(
            json.dumps(public_dataset.feature_spec, indent=2).encode(),
            content_type="application/json",
            filename=f"{slug}-feature-spec-{public_dataset.content_sha256[:12]}.json",
        )


class PulledFolderDownloadApi(APIView):
    @extend_schema(
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        description="Members: a zip of the folder `onefold pull <slug>` writes, onefold-<slug>/ with features.npz, "
        "feature-spec.json and federation.json, for `onefold train` to read once unzipped.",
    )
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        federation_require_member(federation=federation, user=request.user)
        public_dataset = public_dataset_current(federation=federation)
        folder = pulled_folder_name(slug)
        files = pulled_files(
            features=artifact_read(public_dataset.features_file),
            feature_spec=public_dataset.feature_spec,
            federation=FederationOutput(federation).data,
        )
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(f"{folder}/{name}", data)
        return attachment(
            buffer.getvalue(), content_type="application/zip", filename=f"{folder}.zip"
        )


class EvaluationSplitApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(responses=EvaluationSplitOutput)
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        return Response(
            EvaluationSplitOutput(
                evaluation_split_current(federation=federation, user=request.user)
            ).data
        )

    @extend_schema(request=UploadInput, responses={201: EvaluationSplitOutput})
    def post(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        split = evaluation_split_upload(
            federation=federation,
            data=uploaded_bytes(request),
            uploaded_by=request.user,
            request=request,
        )
        return Response(EvaluationSplitOutput(split).data, status=status.HTTP_201_CREATED)


class EvaluationSplitDownloadApi(APIView):
    @extend_schema(
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
        description="Operators only: an NPZ with arrays 'features' (float32) and 'labels' (class indices).",
    )
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        split = evaluation_split_current(federation=federation, user=request.user)
        return attachment(
            artifact_read(split.data_file),
            content_type="application/octet-stream",
            filename=f"{slug}-evaluation-{split.content_sha256[:12]}.npz",
        )
