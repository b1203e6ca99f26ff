from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.augmentations.models import AugmentationStatus, GeneratorKind
from market.augmentations.selectors import (
    augmentation_get,
    augmentation_list,
    generator_download,
    seed_summaries,
)
from market.augmentations.services import (
    augmentation_cancel,
    augmentation_create,
    augmentation_start,
    seeds_upload,
)
from market.errors import InvalidInput
from market.federations.selectors import federation_get
from market.json_input import CheckedJSONField
from workers.algorithms.faug.leakage import device_server_leakage


class SeedSummaryOutput(serializers.Serializer):
    organisation = serializers.CharField()
    n_seeds = serializers.IntegerField()
    n_target = serializers.IntegerField()
    n_redundant = serializers.IntegerField()
    leakage = serializers.FloatField(
        help_text="Device–server leakage: |target| / (|target| + |redundant|)."
    )
    n_pooled = serializers.IntegerField(help_text="Every silo's seeds so far.")
    inter_device_leakage = serializers.FloatField(
        help_text="What the other members learn from the generator: |target| / n_pooled."
    )
    target_labels = serializers.ListField(
        child=serializers.IntegerField(), allow_null=True, help_text="Your own upload's only."
    )


class AugmentationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    name = serializers.CharField()
    generator = serializers.ChoiceField(GeneratorKind.choices)
    generator_display = serializers.CharField(source="get_generator_display")
    n_features = serializers.IntegerField()
    class_labels = serializers.ListField(
        source="federation.class_labels", child=serializers.CharField()
    )
    epochs = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    private = serializers.BooleanField()
    use_public_data = serializers.SerializerMethodField(
        help_text="Whether the GAN pretrains on the public data (unlabelled, no ε) before the seeds."
    )
    public_dataset = serializers.IntegerField(
        source="public_dataset_id",
        allow_null=True,
        help_text="The id of the public data version it pretrains on.",
    )
    noise_multiplier = serializers.FloatField(allow_null=True)
    target_epsilon = serializers.FloatField(allow_null=True)
    max_grad_norm = serializers.FloatField()
    delta = serializers.FloatField()
    status = serializers.ChoiceField(AugmentationStatus.choices)
    status_display = serializers.CharField(source="get_status_display")
    status_reason = serializers.CharField()
    epsilon = serializers.SerializerMethodField(
        help_text="Example-level ε of the DP generator, reserved at start and charged on publication."
    )
    generator_spec = serializers.JSONField(allow_null=True)
    generator_bytes = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    cancel_requested_at = serializers.DateTimeField(
        allow_null=True, help_text="When an operator asked the training to stop."
    )
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_use_public_data(self, augmentation) -> bool:
        return augmentation.public_dataset_id is not None

    def get_epsilon(self, augmentation) -> float | None:
        return (augmentation.privacy_report or {}).get("epsilon")


class AugmentationDetailOutput(AugmentationOutput):
    seeds = serializers.SerializerMethodField()

    def get_seeds(self, augmentation) -> list[dict]:
        return SeedSummaryOutput(
            seed_summaries(augmentation=augmentation, user=self.context["user"]), many=True
        ).data


class AugmentationInput(serializers.Serializer):
    federation = serializers.SlugField()
    name = serializers.CharField(max_length=200)
    generator = serializers.ChoiceField(
        GeneratorKind.choices,
        required=False,
        default=GeneratorKind.MLP_GAN,
        help_text="'mlp_gan' (features in [0, 1], DP possible, publishes the generator) or 'ctgan' (tabular, "
        "no DP, publishes generated samples).",
    )
    n_features = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    epochs = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    batch_size = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    noise_multiplier = serializers.FloatField(required=False, allow_null=True)
    target_epsilon = serializers.FloatField(required=False, allow_null=True)
    max_grad_norm = serializers.FloatField(required=False, default=1.0)
    delta = serializers.FloatField(required=False, default=1e-5)
    use_public_data = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Pretrain the MLP GAN on the federation's current public data first (unlabelled, no ε): its "
        "columns must be the seeds' features, with values in [0, 1].",
    )


class SeedsInput(serializers.Serializer):
    target_labels = CheckedJSONField(help_text="Class indices you lack, e.g. [3, 7].")
    labels = CheckedJSONField(help_text="One class index per seed row.")
    features = CheckedJSONField(
        help_text="One row of n_features numbers in [0, 1] per seed: samples of your target labels "
        "and redundant samples of others."
    )


class LeakageInput(serializers.Serializer):
    target_labels = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)
    labels = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)


class LeakageOutput(serializers.Serializer):
    n_target = serializers.IntegerField()
    n_redundant = serializers.IntegerField()
    leakage = serializers.FloatField()


class AugmentationListApi(APIView):
    @extend_schema(responses=AugmentationOutput(many=True))
    def get(self, request):
        return Response(AugmentationOutput(augmentation_list(user=request.user), many=True).data)

    @extend_schema(request=AugmentationInput, responses={201: AugmentationDetailOutput})
    def post(self, request):
        """Operators open a federated augmentation (a DP discriminator with ``noise_multiplier`` or
        ``target_epsilon``)."""
        given = AugmentationInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        federation = federation_get(slug=fields.pop("federation"), user=request.user)
        augmentation = augmentation_create(federation=federation, actor=request.user, **fields)
        return Response(
            AugmentationDetailOutput(augmentation, context={"user": request.user}).data,
            status=status.HTTP_201_CREATED,
        )


class AugmentationDetailApi(APIView):
    @extend_schema(responses=AugmentationDetailOutput)
    def get(self, request, augmentation_id):
        augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
        return Response(AugmentationDetailOutput(augmentation, context={"user": request.user}).data)


class SeedsUploadApi(APIView):
    @extend_schema(request=SeedsInput, responses={201: SeedSummaryOutput})
    def post(self, request, augmentation_id):
        """Upload your seeds (once): samples of your target labels and redundant samples of other labels.

        For a CTGAN (``generator: "ctgan"``) the market publishes rows generated from the pooled seeds to every
        member, with no privacy guarantee: a CTGAN trained on few seeds can reproduce seed rows. Generated rows
        within 1 % of a seed row in every column are dropped before publishing (``seed_copies_dropped`` in the
        published ``generator_spec``), and nothing is published when more than half are such copies; upload
        only rows you accept other members may see."""
        augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
        given = SeedsInput(data=request.data)
        given.is_valid(raise_exception=True)
        seeds_upload(augmentation=augmentation, user=request.user, **given.validated_data)
        [own] = seed_summaries(augmentation=augmentation, user=request.user)  # a silo sees its own
        return Response(SeedSummaryOutput(own).data, status=status.HTTP_201_CREATED)


class LeakagePreviewApi(APIView):
    @extend_schema(request=LeakageInput, responses=LeakageOutput)
    def post(self, request, augmentation_id):
        """The device–server leakage an upload of these labels would have; nothing is stored."""
        augmentation_get(augmentation_id=augmentation_id, user=request.user)
        given = LeakageInput(data=request.data)
        given.is_valid(raise_exception=True)
        targets = set(given.validated_data["target_labels"])
        labels = given.validated_data["labels"]
        n_target = sum(label in targets for label in labels)
        if n_target == 0:
            raise InvalidInput("None of these labels is a target label; upload seeds of them.")
        leakage = device_server_leakage(n_target, len(labels) - n_target)
        return Response(
            LeakageOutput(
                {"n_target": n_target, "n_redundant": len(labels) - n_target, "leakage": leakage}
            ).data
        )


class AugmentationStartApi(APIView):
    @extend_schema(request=None, responses={202: AugmentationDetailOutput})
    def post(self, request, augmentation_id):
        """Operators start the generator's training; a DP generator's ε is reserved for each contributing
        silo first (409 when one would overspend)."""
        augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
        augmentation = augmentation_start(
            augmentation=augmentation, actor=request.user, request=request
        )
        return Response(
            AugmentationDetailOutput(augmentation, context={"user": request.user}).data,
            status=status.HTTP_202_ACCEPTED,
        )


class AugmentationCancelApi(APIView):
    @extend_schema(request=None, responses={202: AugmentationDetailOutput})
    def post(self, request, augmentation_id):
        """Operators cancel an augmentation: at once before training (any reserved ε is released), or its worker
        stops at its next step and releases (409 once it has ended)."""
        augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
        augmentation = augmentation_cancel(
            augmentation=augmentation, actor=request.user, request=request
        )
        return Response(
            AugmentationDetailOutput(augmentation, context={"user": request.user}).data,
            status=status.HTTP_202_ACCEPTED,
        )


class GeneratorDownloadApi(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request, augmentation_id):
        """The published generator: safetensors, its spec (and any DP-SGD declaration) in the metadata; for a
        CTGAN augmentation its generated samples instead, an .npz of float32 ``features`` and int64 ``labels``
        (read it with ``allow_pickle=False``)."""
        augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
        response = HttpResponse(
            generator_download(augmentation=augmentation, user=request.user),
            content_type="application/octet-stream",
        )
        response["Content-Disposition"] = (
            f'attachment; filename="augmentation-{augmentation.id}-generator.{augmentation.published_extension}"'
        )
        return response
