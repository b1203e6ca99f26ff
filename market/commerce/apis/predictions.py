"""The API of predictions: a bought model called on rows (JSON or CSV), limited, metered and charged."""

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from market.accounts.authentication import SteadyRateThrottle
from market.commerce.predictions import model_predict
from market.json_input import CheckedJSONParser
from market.uploads import body_chunks
from workers.tables import csv_stream_read


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
