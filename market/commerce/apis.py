import hashlib
import io

from django.conf import settings
from django.core.files.storage import default_storage
from django.http import FileResponse, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from market.accounts.authentication import SteadyRateThrottle
from market.accounts.models import Organisation
from market.commerce import plots
from market.commerce.cards import model_card
from market.commerce.delivery import (
    download_delivered,
    download_filename,
    download_link_create,
    download_resolve,
    presigned_download_url,
)
from market.commerce.models import ListingAccess, ListingStatus, WalletEntryKind
from market.commerce.money import payouts_of
from market.commerce.packages import download_content
from market.commerce.payouts import payable_cents, payout_record
from market.commerce.predictions import model_predict
from market.commerce.purchases import listing_for_purchase, purchase_create
from market.commerce.selectors import (
    catalog_filters_from,
    catalog_flags_of,
    catalog_page,
    earnings_for,
    earnings_organisation,
    global_model_get,
    listing_get,
    purchase_list,
    wallet_for,
)
from market.commerce.services import (
    PredictionLimits,
    listing_create,
    listing_publish,
    listing_retire,
    require_operator,
)
from market.commerce.wallets import wallet_top_up
from market.errors import NotFound
from market.federations.models import PrivacyLevel
from market.jobs.visibility import own_contribution_values
from market.json_input import CheckedJSONParser
from market.uploads import body_chunks
from workers.tables import csv_stream_read


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


class CatalogPagination(LimitOffsetPagination):
    default_limit = 20
    max_limit = 100

    def page_response(
        self, request, *, count: int, limit: int, offset: int, results: list
    ) -> Response:
        """The same envelope as ``paginate_queryset`` + ``get_paginated_response``, for a page read elsewhere."""
        self.request, self.count, self.limit, self.offset = request, count, limit, offset
        return self.get_paginated_response(results)


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


class PurchaseOutput(serializers.Serializer):
    id = serializers.IntegerField()
    listing = serializers.IntegerField(source="listing_id")
    listing_name = serializers.CharField(source="listing.name")
    global_model = serializers.IntegerField(source="global_model_id")
    buyer_organisation = serializers.CharField(source="buyer_organisation.name")
    plan = serializers.IntegerField(source="plan_id", allow_null=True)
    price_cents = serializers.IntegerField()
    fee_cents = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class PurchaseInput(serializers.Serializer):
    plan = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=2**63 - 1,
        help_text="The pricing plan to buy; required where the listing has plans you can see.",
    )


class PurchaseCreatedOutput(PurchaseOutput):
    api_token = serializers.CharField(
        allow_null=True,
        help_text="Predictions-only listings: the key of an API token that calls only this model's predict "
        "endpoint, shown once (null on a replay and for downloads).",
    )


class ListingPurchaseApi(APIView):
    @extend_schema(
        request=PurchaseInput,
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        responses={201: PurchaseCreatedOutput},
    )
    def post(self, request, listing_id):
        """Buy a listing (with one of its plans, where it has some); a repeated Idempotency-Key returns the first
        purchase (header Idempotent-Replayed)."""
        listing_get(listing_id=listing_id, user=request.user)
        given = PurchaseInput(data=request.data)
        given.is_valid(raise_exception=True)
        result = purchase_create(
            listing=listing_for_purchase(listing_id=listing_id),
            user=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            plan_id=given.validated_data["plan"],
            request=request,
        )
        result.purchase.api_token = result.api_token_key
        response = Response(
            PurchaseCreatedOutput(result.purchase).data, status=status.HTTP_201_CREATED
        )
        response["Idempotent-Replayed"] = "true" if result.replayed else "false"
        return response


class PurchaseListApi(APIView):
    pagination_class = CatalogPagination

    @extend_schema(
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses=PurchaseOutput(many=True),
    )
    def get(self, request):
        """Your organisation's purchases, newest first (operators: everyone's)."""
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(purchase_list(user=request.user), request, view=self)
        return paginator.get_paginated_response(PurchaseOutput(page, many=True).data)


class WalletEntryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(WalletEntryKind.choices)
    amount_cents = serializers.IntegerField()
    balance_after_cents = serializers.IntegerField()
    reference = serializers.CharField()
    purchase = serializers.IntegerField(source="purchase_id", allow_null=True)
    note = serializers.CharField()
    created_at = serializers.DateTimeField()


def wallet_response(request, organisation_id):
    organisation, balance_cents, entries = wallet_for(
        user=request.user, organisation_id=organisation_id
    )
    paginator = CatalogPagination()
    page = paginator.paginate_queryset(entries, request)
    return Response(
        {
            "organisation": organisation.id,
            "organisation_name": organisation.name,
            "balance_cents": balance_cents,
            "count": paginator.count,
            "entries": WalletEntryOutput(page, many=True).data,
        }
    )


class WalletApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        """Your organisation's balance and ledger (newest first, paginated)."""
        return wallet_response(request, None)


class OrganisationWalletApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, organisation_id):
        """An organisation's balance and ledger: your own, or any for operators."""
        return wallet_response(request, organisation_id)


class TopUpInput(serializers.Serializer):
    amount_cents = serializers.IntegerField(min_value=1)
    reference = serializers.CharField(
        max_length=200, help_text="The payment's reference; posting it again is harmless."
    )
    note = serializers.CharField(max_length=500, allow_blank=True, default="")


class TopUpApi(APIView):
    @extend_schema(request=TopUpInput, responses={201: WalletEntryOutput, 200: WalletEntryOutput})
    def post(self, request, organisation_id):
        """Operators: credit a wallet. 201 when credited, 200 when this reference was already credited."""
        require_operator(
            request.user, "top up wallets"
        )  # before the lookup: no probing organisation ids
        given = TopUpInput(data=request.data)
        given.is_valid(raise_exception=True)
        organisation = Organisation.objects.filter(pk=organisation_id).first()
        if organisation is None:
            raise NotFound(f"There is no organisation #{organisation_id}.")
        entry, created = wallet_top_up(
            organisation=organisation, actor=request.user, request=request, **given.validated_data
        )
        return Response(
            WalletEntryOutput(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class PayoutInput(serializers.Serializer):
    amount_cents = serializers.IntegerField(min_value=1)
    reference = serializers.CharField(
        max_length=200,
        help_text="The reference of the payment made outside the app; posting it again is harmless.",
    )
    note = serializers.CharField(max_length=500, allow_blank=True, default="")


class PayoutApi(APIView):
    @extend_schema(request=PayoutInput, responses={201: WalletEntryOutput, 200: WalletEntryOutput})
    def post(self, request, organisation_id):
        """Operators: record a payout of a silo's earnings made outside the app (at most what it earned and has
        not been paid). 201 when recorded, 200 when this reference was already recorded."""
        require_operator(request.user, "record payouts")  # before the lookup: no probing ids
        given = PayoutInput(data=request.data)
        given.is_valid(raise_exception=True)
        organisation = Organisation.objects.filter(pk=organisation_id).first()
        if organisation is None:
            raise NotFound(f"There is no organisation #{organisation_id}.")
        entry, created = payout_record(
            organisation=organisation, actor=request.user, request=request, **given.validated_data
        )
        return Response(
            WalletEntryOutput(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class EarningsQuery(serializers.Serializer):
    organisation = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


class EarningsApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("organisation", int, description="Operators only.")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        """Your organisation's revenue shares: total, per listing and per purchase; and its own contribution value
        in each global model it went into at L0, with the value's standard error and rank band (never another
        silo's)."""
        given = EarningsQuery(data=request.query_params)
        given.is_valid(raise_exception=True)
        organisation = earnings_organisation(
            user=request.user, organisation_id=given.validated_data.get("organisation")
        )
        return Response(
            {
                "organisation": organisation.id,
                **earnings_for(organisation=organisation),
                "contribution_values": own_contribution_values(organisation_id=organisation.id),
                "payable_cents": payable_cents(organisation=organisation),
                "payouts": WalletEntryOutput(payouts_of(organisation=organisation), many=True).data,
            }
        )


class DownloadLinkInput(serializers.Serializer):
    format = serializers.CharField(
        max_length=40,
        help_text="onnx, skops, xgboost-json, safetensors, kernel_npz, "
        "bundle, or raw_onnx (the ONNX with the feature encoding in front, built on download).",
    )
    package = serializers.BooleanField(
        default=False,
        help_text="Zip the file with the model card README.md and the feature specification.",
    )


class DownloadLinkApi(APIView):
    @extend_schema(request=DownloadLinkInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, global_model_id):
        """A short-lived signed link to one file of a model your organisation bought."""
        given = DownloadLinkInput(data=request.data)
        given.is_valid(raise_exception=True)
        link = download_link_create(
            user=request.user,
            global_model_id=global_model_id,
            file_format=given.validated_data["format"],
            package=given.validated_data["package"],
            request=request,
        )
        url = request.build_absolute_uri(reverse("api-download", args=[link.token]))
        return Response({"url": url, "expires_at": link.expires_at}, status=status.HTTP_201_CREATED)


class DownloadApi(APIView):
    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            302: OpenApiResponse(
                description="With object storage: the file's presigned, expiring URL in Location "
                "(its SHA-256 in X-Content-SHA256)."
            ),
        }
    )
    def get(self, request, token):
        """The file of a signed link, for the signed-in user it was made for (session or API token)."""
        resolved = download_resolve(token=token, user=request.user, request=request)
        presigned_url = presigned_download_url(resolved)
        if presigned_url:  # the store serves the stored bytes
            filename = download_filename(resolved.model_file)
            response = HttpResponseRedirect(presigned_url)
            response["X-Content-SHA256"] = resolved.model_file.sha256
        elif resolved.variant == "file" and not resolved.package:  # the stored bytes, streamed
            model_file = resolved.model_file
            filename = download_filename(model_file)
            response = FileResponse(
                default_storage.open(model_file.stored_name, "rb"),
                as_attachment=True,
                filename=filename,
                content_type="application/octet-stream",
            )
            response["X-Content-SHA256"] = model_file.sha256
        else:
            filename, data = download_content(resolved)
            response = FileResponse(
                io.BytesIO(data),
                as_attachment=True,
                filename=filename,
                content_type="application/zip" if resolved.package else "application/octet-stream",
            )
            response["X-Content-SHA256"] = hashlib.sha256(data).hexdigest()
        download_delivered(
            resolved=resolved,
            user=request.user,
            filename=filename,
            sha256=response["X-Content-SHA256"],
            request=request,
        )
        response["Cache-Control"] = "no-store"
        return response


class CsvParser(BaseParser):
    """The CSV body's bytes, read in chunks and stopped as soon as it holds more rows than a prediction takes
    or more bytes than an upload may have, before anything parses it."""

    media_type = "text/csv"

    def parse(self, stream, media_type=None, parser_context=None):
        return csv_stream_read(body_chunks(stream), max_rows=settings.ONEFOLD_PREDICT_MAX_ROWS)


class PredictThrottle(SteadyRateThrottle):
    """Predictions per user, at ONEFOLD_PREDICT_RATE read at request time (so that tests can change it)."""

    scope = "predict"

    def get_rate(self):
        return settings.ONEFOLD_PREDICT_RATE

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class UsageOfCallOutput(serializers.Serializer):
    charge = serializers.IntegerField()
    replayed = serializers.BooleanField(
        help_text="An earlier call with this Idempotency-Key was charged."
    )
    rows = serializers.IntegerField()
    free_rows = serializers.IntegerField(help_text="Rows the trial covered.")
    amount_cents = serializers.IntegerField()
    monthly_fee_cents = serializers.IntegerField(
        help_text="Of amount_cents, the plan's monthly fee: charged with the first call of each month after the "
        "month of purchase."
    )
    month_rows = serializers.IntegerField(
        help_text="Rows predicted this month, this call included."
    )
    remaining_cap_rows = serializers.IntegerField(
        allow_null=True, help_text="Rows left under the plan's monthly cap; null without a cap."
    )


class PredictionOutput(serializers.Serializer):
    classes = serializers.ListField(child=serializers.CharField())
    probabilities = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField())
    )
    class_labels = serializers.ListField(child=serializers.CharField())
    usage = UsageOfCallOutput(
        allow_null=True, help_text="Predictions-only purchases: this call's metering."
    )


class PredictApi(APIView):
    parser_classes = [CheckedJSONParser, CsvParser]
    throttle_classes = [
        *api_settings.DEFAULT_THROTTLE_CLASSES,
        PredictThrottle,
    ]  # the per-token limit still applies

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "text/csv": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="Predictions-only purchases: a call repeated with the same key is charged once.",
            )
        ],
        responses=PredictionOutput,
    )
    def post(self, request, global_model_id):
        """Classes and probabilities for rows in the federation's raw feature schema (JSON {"rows": [...]} or CSV).
        A predictions-only purchase's call is limited, metered and charged (``usage``)."""
        given = (
            {"csv_data": request.data}
            if isinstance(request.data, bytes)
            else {"rows": request.data.get("rows") if hasattr(request.data, "get") else None}
        )
        result = model_predict(
            user=request.user,
            global_model_id=global_model_id,
            idempotency_key=request.headers.get("Idempotency-Key"),
            request=request,
            **given,
        )
        return Response(result)
