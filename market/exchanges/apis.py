from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.exchanges.models import ExchangeStatus, RoundStatus
from market.exchanges.selectors import (
    exchange_get,
    exchange_list,
    exchange_round_get,
    exchange_rounds,
    logits_download,
)
from market.exchanges.services import exchange_create, logits_upload
from market.federations.selectors import federation_get
from market.json_input import CheckedJSONField
from workers.algorithms.fd import BITS_PER_NUMBER


class RoundOutput(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.ChoiceField(RoundStatus.choices)
    status_display = serializers.CharField(source="get_status_display")
    status_reason = serializers.CharField()
    opens_at = serializers.DateTimeField()
    deadline = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    participants = serializers.IntegerField()
    uploaded = serializers.BooleanField(
        source="own_uploads", help_text="Whether your organisation uploaded."
    )


class ExchangeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField(source="federation.slug")
    name = serializers.CharField()
    rounds = serializers.IntegerField()
    round_seconds = serializers.IntegerField()
    min_silos = serializers.IntegerField()
    min_contributors = serializers.IntegerField(
        source="federation.fd_min_contributors",
        help_text="Fewest other silos a label's average is made of; fewer, and it is withheld.",
    )
    status = serializers.ChoiceField(ExchangeStatus.choices)
    class_labels = serializers.ListField(
        source="federation.class_labels", child=serializers.CharField()
    )
    payload_bits_per_silo_round = serializers.SerializerMethodField(
        help_text="C² numbers of 32 bits, each way."
    )
    created_at = serializers.DateTimeField()

    def get_payload_bits_per_silo_round(self, exchange) -> int:
        return exchange.federation.n_classes**2 * BITS_PER_NUMBER


class ExchangeDetailOutput(ExchangeOutput):
    round_list = serializers.SerializerMethodField()

    def get_round_list(self, exchange) -> list[dict]:
        return RoundOutput(
            exchange_rounds(exchange=exchange, user=self.context["user"]), many=True
        ).data


class ExchangeInput(serializers.Serializer):
    federation = serializers.SlugField()
    name = serializers.CharField(max_length=200)
    rounds = serializers.IntegerField(min_value=1, max_value=32767)
    round_seconds = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    min_silos = serializers.IntegerField(min_value=1, max_value=32767)


class LogitsInput(serializers.Serializer):
    labels = CheckedJSONField(help_text="Class indices you hold, e.g. [0, 3, 7].")
    logits = CheckedJSONField(
        help_text="C rows of C numbers: row ℓ is your model's mean logit vector on your "
        "examples of label ℓ (zeros for labels you do not hold)."
    )


class DownloadOutput(serializers.Serializer):
    round = serializers.IntegerField(source="exchange_round.number")
    labels = serializers.ListField(child=serializers.IntegerField())
    global_logits = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField())
    )
    available = serializers.ListField(
        child=serializers.BooleanField(),
        help_text="Per label: whether its average is published (false: fewer than the federation's "
        "fd_min_contributors other silos held it; its row is zeros).",
    )
    withheld = serializers.SerializerMethodField(
        help_text="A sentence naming the labels whose average is withheld, or null."
    )

    def get_withheld(self, upload) -> str | None:
        withheld = [label for label, shown in enumerate(upload.available or []) if not shown]
        if not withheld:
            return None
        minimum = upload.exchange_round.exchange.federation.fd_min_contributors
        return (
            f"No average for label(s) {', '.join(map(str, withheld))}: fewer than {minimum} other silos "
            f"uploaded them, and an average of fewer silos would hand over their own logits."
        )


class ExchangeListApi(APIView):
    @extend_schema(responses=ExchangeOutput(many=True))
    def get(self, request):
        return Response(ExchangeOutput(exchange_list(user=request.user), many=True).data)

    @extend_schema(request=ExchangeInput, responses={201: ExchangeDetailOutput})
    def post(self, request):
        """Operators open an FD exchange: ``rounds`` rounds of ``round_seconds``, each needing ``min_silos``."""
        given = ExchangeInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        federation = federation_get(slug=fields.pop("federation"), user=request.user)
        exchange = exchange_create(federation=federation, actor=request.user, **fields)
        return Response(
            ExchangeDetailOutput(exchange, context={"user": request.user}).data,
            status=status.HTTP_201_CREATED,
        )


class ExchangeDetailApi(APIView):
    @extend_schema(responses=ExchangeDetailOutput)
    def get(self, request, exchange_id):
        exchange = exchange_get(exchange_id=exchange_id, user=request.user)
        return Response(ExchangeDetailOutput(exchange, context={"user": request.user}).data)


class LogitsUploadApi(APIView):
    @extend_schema(request=LogitsInput, responses={201: RoundOutput})
    def post(self, request, exchange_id, number):
        """Upload your per-label mean logits for an open round (once per round)."""
        exchange = exchange_get(exchange_id=exchange_id, user=request.user)
        given = LogitsInput(data=request.data)
        given.is_valid(raise_exception=True)
        logits_upload(
            exchange_round=exchange_round_get(exchange=exchange, number=number),
            user=request.user,
            **given.validated_data,
        )
        exchange_round = exchange_rounds(exchange=exchange, user=request.user).get(number=number)
        return Response(RoundOutput(exchange_round).data, status=status.HTTP_201_CREATED)


class LogitsDownloadApi(APIView):
    @extend_schema(responses=DownloadOutput)
    def get(self, request, exchange_id, number):
        """Your global logits of an aggregated round: per label, the other participants' average."""
        exchange = exchange_get(exchange_id=exchange_id, user=request.user)
        upload = logits_download(
            exchange_round=exchange_round_get(exchange=exchange, number=number), user=request.user
        )
        return Response(DownloadOutput(upload).data)
