from django.db.models import QuerySet

from market.accounts.models import User
from market.errors import NotFound
from market.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


def webhook_endpoint_list(*, user: User) -> QuerySet[WebhookEndpoint]:
    """The endpoints of the user's organisation (none for someone who belongs to none, operators included)."""
    if user.organisation_id is None:
        return WebhookEndpoint.objects.none()
    return WebhookEndpoint.objects.filter(organisation_id=user.organisation_id).order_by("id")


def webhook_endpoint_get(*, user: User, endpoint_id: int, lock: bool = False) -> WebhookEndpoint:
    endpoints = webhook_endpoint_list(user=user)
    endpoint = (endpoints.select_for_update() if lock else endpoints).filter(id=endpoint_id).first()
    if endpoint is None:
        raise NotFound(f"There is no webhook endpoint #{endpoint_id} of your organisation.")
    return endpoint


def webhook_delivery_list(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return endpoint.deliveries.prefetch_related("attempt_log").order_by("-id")


def webhook_delivery_get(*, user: User, delivery_id: int) -> WebhookDelivery:
    delivery = (
        WebhookDelivery.objects.select_related("endpoint")
        .filter(id=delivery_id, endpoint__in=webhook_endpoint_list(user=user))
        .first()
    )
    if delivery is None:
        raise NotFound(f"There is no webhook delivery #{delivery_id} of your organisation.")
    return delivery


def webhook_attempt_log(*, endpoint: WebhookEndpoint, limit: int = 100) -> QuerySet[WebhookAttempt]:
    """The endpoint's delivery log, newest attempt first."""
    return (
        WebhookAttempt.objects.filter(delivery__endpoint=endpoint)
        .select_related("delivery")
        .order_by("-id")[:limit]
    )
