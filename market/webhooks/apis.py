from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.json_input import json_text_parse
from market.webhooks.bodies import WebhookEventBody
from market.webhooks.delivery import webhook_body
from market.webhooks.models import DeliveryStatus, WebhookEventType
from market.webhooks.selectors import (
    webhook_delivery_list,
    webhook_endpoint_get,
    webhook_endpoint_list,
)
from market.webhooks.services import (
    webhook_endpoint_create,
    webhook_endpoint_ping,
    webhook_endpoint_rotate,
    webhook_endpoint_set_active,
    webhook_redeliver,
)

DELIVERIES_SHOWN = 100


class EndpointOutput(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(WebhookEventType.choices))
    description = serializers.CharField()
    is_active = serializers.BooleanField()
    consecutive_failures = serializers.IntegerField()
    disabled_reason = serializers.CharField(help_text="Why the market or a member disabled it.")
    created_at = serializers.DateTimeField()


class NewSecretOutput(EndpointOutput):
    secret = serializers.CharField(
        help_text="The signing secret. It is shown only now: store it where the receiver can read it."
    )


class EndpointInput(serializers.Serializer):
    url = serializers.CharField(max_length=2000, help_text="An https:// URL on a public address.")
    events = serializers.ListField(
        child=serializers.ChoiceField(WebhookEventType.choices), min_length=1
    )
    description = serializers.CharField(max_length=200, required=False, default="")


class AttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    latency_ms = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    succeeded = serializers.BooleanField()
    error = serializers.CharField()


class DeliveryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    delivery = serializers.UUIDField(source="uuid", help_text="Sent as Onefold-Delivery.")
    event_type = serializers.ChoiceField(WebhookEventType.choices)
    status = serializers.ChoiceField(DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)
    body = serializers.SerializerMethodField()
    attempt_log = AttemptOutput(many=True)

    @extend_schema_field(WebhookEventBody)
    def get_body(self, delivery) -> dict:
        return json_text_parse(webhook_body(delivery))


def _with_secret(endpoint, secret: str) -> dict:
    return {**EndpointOutput(endpoint).data, "secret": secret}


class WebhookEndpointListApi(APIView):
    """Your organisation's webhook endpoints; POST registers one and shows its signing secret once."""

    @extend_schema(responses=EndpointOutput(many=True))
    def get(self, request):
        return Response(EndpointOutput(webhook_endpoint_list(user=request.user), many=True).data)

    @extend_schema(request=EndpointInput, responses={201: NewSecretOutput})
    def post(self, request):
        given = EndpointInput(data=request.data)
        given.is_valid(raise_exception=True)
        endpoint, secret = webhook_endpoint_create(
            user=request.user, request=request, **given.validated_data
        )
        return Response(_with_secret(endpoint, secret), status=status.HTTP_201_CREATED)


class WebhookEndpointApi(APIView):
    @extend_schema(responses=EndpointOutput)
    def get(self, request, endpoint_id: int):
        endpoint = webhook_endpoint_get(user=request.user, endpoint_id=endpoint_id)
        return Response(EndpointOutput(endpoint).data)


class WebhookEndpointRotateApi(APIView):
    """A new signing secret, shown only now; the old one also signs for a grace period (docs/automation.md)."""

    @extend_schema(request=None, responses=NewSecretOutput)
    def post(self, request, endpoint_id: int):
        endpoint, secret = webhook_endpoint_rotate(
            user=request.user, endpoint_id=endpoint_id, request=request
        )
        return Response(_with_secret(endpoint, secret))


class WebhookEndpointDisableApi(APIView):
    active = False

    @extend_schema(request=None, responses=EndpointOutput)
    def post(self, request, endpoint_id: int):
        endpoint = webhook_endpoint_set_active(
            user=request.user, endpoint_id=endpoint_id, active=self.active, request=request
        )
        return Response(EndpointOutput(endpoint).data)


class WebhookEndpointEnableApi(WebhookEndpointDisableApi):
    """Enable an endpoint again; the deliveries that waited for it are sent at once."""

    active = True


class WebhookEndpointPingApi(APIView):
    """Queue a webhook.ping delivery to the endpoint: a signed test of the receiver."""

    @extend_schema(request=None, responses={201: DeliveryOutput})
    def post(self, request, endpoint_id: int):
        delivery = webhook_endpoint_ping(
            user=request.user, endpoint_id=endpoint_id, request=request
        )
        return Response(DeliveryOutput(delivery).data, status=status.HTTP_201_CREATED)


class WebhookDeliveryListApi(APIView):
    """The endpoint's latest deliveries, newest first, each with its body and attempt log."""

    @extend_schema(responses=DeliveryOutput(many=True))
    def get(self, request, endpoint_id: int):
        endpoint = webhook_endpoint_get(user=request.user, endpoint_id=endpoint_id)
        deliveries = webhook_delivery_list(endpoint=endpoint)[:DELIVERIES_SHOWN]
        return Response(DeliveryOutput(deliveries, many=True).data)


class WebhookRedeliverApi(APIView):
    """Send a delivery's event again, as a new delivery."""

    @extend_schema(request=None, responses={201: DeliveryOutput})
    def post(self, request, delivery_id: int):
        delivery = webhook_redeliver(user=request.user, delivery_id=delivery_id, request=request)
        return Response(DeliveryOutput(delivery).data, status=status.HTTP_201_CREATED)
