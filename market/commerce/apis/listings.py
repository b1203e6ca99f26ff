"""The API of listings: the catalog, a listing with its model card and plots, and the operator's draft, publish
and retire."""

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce import plots
from market.commerce.apis.pagination import CatalogPagination
from market.commerce.cards import model_card
from market.commerce.models import ListingAccess, ListingStatus
from market.commerce.selectors import (
    catalog_filters_from,
    catalog_flags_of,
    catalog_page,
    global_model_get,
    listing_get,
)
from market.commerce.services import (
    PredictionLimits,
    listing_create,
    listing_publish,
    listing_retire,
)
from market.errors import NotFound
from market.federations.models import PrivacyLevel


class ListingOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    licence_text = serializers.CharField()
    price_cents = serializers.IntegerField()
    status = serializers.ChoiceField(ListingStatus.choices)
    federation = serializers.SlugField(source="federation.slug")
    global_model = serializers.IntegerField(source="global_model_id")
    previous_version = serializers.IntegerField(source="previous_version_id", allow_null=True)
    model_family = serializers.CharField()
    privacy_level = serializers.ChoiceField(PrivacyLevel.choices)
    accuracy = serializers.FloatField(allow_null=True)
    balanced_accuracy = serializers.FloatField(allow_null=True)
    macro_f1 = serializers.FloatField(allow_null=True)
    roc_auc = serializers.FloatField(allow_null=True)
    access = serializers.ChoiceField(
        ListingAccess.choices,
        help_text="download: the buyer gets the files; predictions: only an API token for the predict endpoint.",
    )
    max_rows_per_call = serializers.IntegerField(allow_null=True)
    max_rows_per_day = serializers.IntegerField(allow_null=True)
    max_calls_per_minute = serializers.IntegerField(allow_null=True)
    publish_override_reason = serializers.CharField(
        help_text="Non-empty when an operator published a model that fails the publish gate."
    )
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    retired_at = serializers.DateTimeField(allow_null=True)


class CatalogListingOutput(ListingOutput):
    quality_flags = serializers.ListField(
        child=serializers.CharField(),
        help_text="The catalog's warning badges, as the web's catalog shows them (market.jobs.quality.catalog_flags): "
        "e.g. a model not above always guessing the majority class.",
    )


class ListingInput(serializers.Serializer):
    global_model = serializers.IntegerField()
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, default="")
    licence_text = serializers.CharField()
    price_cents = serializers.IntegerField(min_value=0)
    previous_version = serializers.IntegerField(required=False, allow_null=True, default=None)
    access = serializers.ChoiceField(ListingAccess.choices, default=ListingAccess.DOWNLOAD)
    max_rows_per_call = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=10**9
    )
    max_rows_per_day = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=10**9
    )
    max_calls_per_minute = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=10**9
    )


# ListingOutput's fields with the database columns they read (``federation.slug`` → ``federation__slug``).
LISTING_OUTPUT_FIELDS = [
    (name, field, field.source.replace(".", "__")) for name, field in ListingOutput().fields.items()
]
LISTING_OUTPUT_COLUMNS = tuple(column for _, _, column in LISTING_OUTPUT_FIELDS)


def listing_output_rows(rows: list[dict]) -> list[dict]:
    """``ListingOutput(listings, many=True).data`` from ``.values(*LISTING_OUTPUT_COLUMNS)`` rows: each field's own
    conversion, without a serializer walking model instances. Same JSON."""
    return [
        {
            name: None if row[column] is None else field.to_representation(row[column])
            for name, field, column in LISTING_OUTPUT_FIELDS
        }
        for row in rows
    ]


CATALOG_PARAMETERS = [
    OpenApiParameter("search", str, description="Words in the name or description."),
    OpenApiParameter("federation", str),
    OpenApiParameter("model_family", str),
    OpenApiParameter("privacy_level", str, enum=PrivacyLevel.values),
    OpenApiParameter("min_price", int, description="Cents."),
    OpenApiParameter("max_price", int, description="Cents."),
    OpenApiParameter("min_accuracy", float),
    OpenApiParameter("min_balanced_accuracy", float),
    OpenApiParameter("min_macro_f1", float),
    OpenApiParameter("min_roc_auc", float),
    OpenApiParameter("status", str, description="Operators only."),
    OpenApiParameter(
        "ordering",
        str,
        enum=["newest", "oldest", "price", "-price", "accuracy", "-accuracy", "name", "-name"],
    ),
    OpenApiParameter("limit", int),
    OpenApiParameter("offset", int),
]


class ListingListApi(APIView):
    pagination_class = (
        CatalogPagination  # read by the schema generator, which then documents the page envelope
    )

    @extend_schema(parameters=CATALOG_PARAMETERS, responses=CatalogListingOutput(many=True))
    def get(self, request):
        """The catalog: published listings, searched, filtered, ordered and paginated."""
        paginator = self.pagination_class()
        limit, offset = paginator.get_limit(request), paginator.get_offset(request)
        renderer = request.accepted_renderer
        # JSON (what API clients ask for) is cached rendered, links included: rendering the page and building its
        # links was a fifth of a cached request's CPU. Other renderers (the browsable API) get the page's data.
        rendered = isinstance(renderer, JSONRenderer)

        def present(count: int, rows: list[dict]) -> bytes | dict:
            results = listing_output_rows(rows)
            flags = catalog_flags_of(global_model_ids=[row["global_model"] for row in results])
            for result in results:
                result["quality_flags"] = flags[result["global_model"]]
            data = paginator.page_response(
                request, count=count, limit=limit, offset=offset, results=results
            ).data
            if not rendered:
                return data
            return renderer.render(data, request.accepted_media_type, self.get_renderer_context())

        page = catalog_page(
            user=request.user,
            filters=catalog_filters_from(request.query_params),
            fields=LISTING_OUTPUT_COLUMNS,
            limit=limit,
            offset=offset,
            present=present,
            presentation=(
                request.build_absolute_uri(),
                request.accepted_media_type,
            ),  # decide the renderer too
        )
        if rendered:
            return HttpResponse(page, content_type=renderer.media_type)
        return Response(page)

    @extend_schema(request=ListingInput, responses={201: ListingOutput})
    def post(self, request):
        """Operators: a draft listing of a global model."""
        given = ListingInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        previous_id = fields.pop("previous_version")
        limits = PredictionLimits(**{name: fields.pop(name) for name in vars(PredictionLimits())})
        listing = listing_create(
            limits=limits,
            global_model=global_model_get(global_model_id=fields.pop("global_model")),
            actor=request.user,
            previous_version=listing_get(listing_id=previous_id, user=request.user)
            if previous_id
            else None,
            request=request,
            **fields,
        )
        return Response(ListingOutput(listing).data, status=status.HTTP_201_CREATED)


class ListingDetailApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, listing_id):
        """The listing with its model card (generated from the job record)."""
        listing = listing_get(listing_id=listing_id, user=request.user)
        card = model_card(listing)
        card["plots"] = {
            name: request.build_absolute_uri(reverse(f"api-listing-{name}", args=[listing.id]))
            for name in ("confusion-matrix", "reliability")
        }
        return Response({**ListingOutput(listing).data, "card": card})


class ListingPublishInput(serializers.Serializer):
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=2000,
        help_text="Only for a model that fails the publish gate (it does not beat the majority-class guess by 5 "
        "points of balanced accuracy): why it is sold anyway. Audited, and shown to buyers on the card.",
    )


class ListingPublishApi(APIView):
    @extend_schema(
        request=ListingPublishInput, responses={200: ListingOutput, 409: OpenApiTypes.OBJECT}
    )
    def post(self, request, listing_id):
        """Operators: publish a draft. A model that fails the publish gate is refused (409) with the sentence that
        says which baseline it lost to and by how much, unless ``override_reason`` is given."""
        given = ListingPublishInput(data=request.data)
        given.is_valid(raise_exception=True)
        listing = listing_publish(
            listing=listing_get(listing_id=listing_id, user=request.user),
            actor=request.user,
            request=request,
            **given.validated_data,
        )
        return Response(ListingOutput(listing).data)


class ListingRetireApi(APIView):
    @extend_schema(request=None, responses=ListingOutput)
    def post(self, request, listing_id):
        listing = listing_retire(
            listing=listing_get(listing_id=listing_id, user=request.user),
            actor=request.user,
            request=request,
        )
        return Response(ListingOutput(listing).data)


class ListingConfusionMatrixApi(APIView):
    @extend_schema(responses={(200, "image/png"): OpenApiTypes.BINARY})
    def get(self, request, listing_id):
        listing = listing_get(listing_id=listing_id, user=request.user)
        matrix = (listing.global_model.metrics or {}).get("confusion_matrix")
        if not matrix:
            raise NotFound("This model has no confusion matrix.")
        return HttpResponse(
            plots.confusion_matrix_png(matrix, listing.federation.class_labels),
            content_type="image/png",
        )


class ListingReliabilityApi(APIView):
    @extend_schema(responses={(200, "image/png"): OpenApiTypes.BINARY})
    def get(self, request, listing_id):
        listing = listing_get(listing_id=listing_id, user=request.user)
        reliability = (listing.global_model.metrics or {}).get("reliability")
        if not reliability:
            raise NotFound("This model has no reliability measurements.")
        return HttpResponse(plots.reliability_png(reliability), content_type="image/png")
