"""Writes on webhook endpoints, and the deliveries an event makes (market.webhooks.delivery sends them)."""

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.services import audit_record
from market.errors import Conflict, InvalidInput, PermissionDenied
from market.outbox import outbox_add
from market.webhooks.events import WebhookEvent
from market.webhooks.models import (
    DeliveryStatus,
    WebhookDelivery,
    WebhookDispatch,
    WebhookDispatchOutbox,
    WebhookEndpoint,
    WebhookEventType,
    WebhookOutbox,
)
from market.webhooks.outbound import webhook_target
from market.webhooks.selectors import webhook_delivery_get, webhook_endpoint_get

SECRET_PREFIX = "whsec_"


def webhook_secret_new() -> str:
    return SECRET_PREFIX + secrets.token_hex(24)


def _events_checked(events: list[str]) -> list[str]:
    unknown = sorted(set(events) - set(WebhookEventType.values))
    if unknown:
        raise InvalidInput(
            f"Unknown event type(s): {', '.join(unknown)}. Choose from {', '.join(WebhookEventType.values)}.",
            field="events",
        )
    if not events:
        raise InvalidInput("Choose at least one event type.", field="events")
    return sorted(set(events))


def _organisation_of(user: User):
    if user.organisation_id is None:
        raise PermissionDenied("Webhooks belong to an organisation, and you belong to none.")
    return user.organisation


def _active_endpoint_slot_check(organisation: Organisation) -> None:
    """Refuse one more active endpoint beyond the organisation's cap, so one organisation cannot multiply every
    event's deliveries (and its calls out of the market) without bound. Locks the organisation's row, so two
    registrations at once cannot both take the last slot; call it inside a transaction."""
    Organisation.objects.select_for_update().get(pk=organisation.pk)
    cap = settings.ONEFOLD_WEBHOOK_ENDPOINTS_PER_ORGANISATION
    if WebhookEndpoint.objects.filter(organisation=organisation, is_active=True).count() >= cap:
        raise Conflict(
            f"Your organisation already has {cap} active webhook endpoint{'' if cap == 1 else 's'}, "
            "the most it may have. "
            "Disable one you no longer need (on its page, or POST /api/webhook-endpoints/<id>/disable/) "
            "to free a slot."
        )


def webhook_endpoint_create(
    *, user: User, url: str, events: list[str], description: str = "", request=None
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint for the user's organisation; returns it and its secret, which is shown only now."""
    organisation = _organisation_of(user)
    url = url.strip()
    if "\x00" in url + description:
        raise InvalidInput("A webhook's URL and description may not hold NUL characters.")
    webhook_target(url)  # refuses a non-HTTPS URL or one that resolves to a private address
    secret = webhook_secret_new()
    with transaction.atomic():
        _active_endpoint_slot_check(organisation)
        endpoint = WebhookEndpoint.objects.create(
            organisation=organisation,
            url=url,
            events=_events_checked(events),
            description=description.strip()[:200],
            secret=secret,
            created_by=user,
        )
        audit_record(
            action="webhook.created",
            actor=user,
            target=endpoint,
            request=request,
            details={"url": url, "events": endpoint.events},
        )
    return endpoint, secret


def webhook_endpoint_rotate(
    *, user: User, endpoint_id: int, request=None
) -> tuple[WebhookEndpoint, str]:
    """A new secret, shown only now; the old one still signs (as a second v1) for the grace period."""
    with transaction.atomic():
        endpoint = webhook_endpoint_get(user=user, endpoint_id=endpoint_id, lock=True)
        secret = webhook_secret_new()
        endpoint.previous_secret, endpoint.secret = endpoint.secret, secret
        endpoint.previous_secret_expires_at = timezone.now() + timedelta(
            seconds=settings.ONEFOLD_WEBHOOK_ROTATION_GRACE_SECONDS
        )
        endpoint.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at"])
        audit_record(action="webhook.secret_rotated", actor=user, target=endpoint, request=request)
    return endpoint, secret


def webhook_endpoint_set_active(
    *, user: User, endpoint_id: int, active: bool, request=None
) -> WebhookEndpoint:
    """Disable an endpoint, or enable it again: its waiting deliveries are then sent at once."""
    with transaction.atomic():
        endpoint = webhook_endpoint_get(user=user, endpoint_id=endpoint_id, lock=True)
        if active and not endpoint.is_active:
            webhook_target(endpoint.url)
            _active_endpoint_slot_check(endpoint.organisation)
            endpoint.consecutive_failures, endpoint.disabled_reason, endpoint.disabled_at = (
                0,
                "",
                None,
            )
            waiting = endpoint.deliveries.filter(status=DeliveryStatus.PENDING)
            waiting.update(next_attempt_at=timezone.now())
            for delivery in waiting:
                outbox_add(WebhookOutbox(delivery=delivery))
        elif not active and endpoint.is_active:
            endpoint.disabled_reason, endpoint.disabled_at = "Disabled by a member.", timezone.now()
        endpoint.is_active = active
        endpoint.save()
        audit_record(
            action="webhook.enabled" if active else "webhook.disabled",
            actor=user,
            target=endpoint,
            request=request,
        )
    return endpoint


def webhook_redeliver(*, user: User, delivery_id: int, request=None) -> WebhookDelivery:
    """Send a delivery again as a new delivery of the same event (a new Onefold-Delivery id)."""
    with transaction.atomic():
        original = webhook_delivery_get(user=user, delivery_id=delivery_id)
        delivery = _delivery_add(
            endpoint=original.endpoint, event_type=original.event_type, payload=original.payload
        )
        audit_record(
            action="webhook.redelivered",
            actor=user,
            target=delivery,
            request=request,
            details={"of": str(original.uuid)},
        )
    return delivery


def webhook_endpoint_ping(*, user: User, endpoint_id: int, request=None) -> WebhookDelivery:
    """Queue a ``webhook.ping`` delivery to the endpoint, whatever events it chose: a check of the receiver."""
    with transaction.atomic():
        endpoint = webhook_endpoint_get(user=user, endpoint_id=endpoint_id)
        delivery = _delivery_add(
            endpoint=endpoint,
            event_type=WebhookEventType.WEBHOOK_PING,
            payload={"endpoint": endpoint.id},
        )
        audit_record(action="webhook.pinged", actor=user, target=endpoint, request=request)
    return delivery


def _delivery_add(*, endpoint: WebhookEndpoint, event_type: str, payload: dict) -> WebhookDelivery:
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event_type=event_type, payload=payload, next_attempt_at=timezone.now()
    )
    outbox_add(WebhookOutbox(delivery=delivery))
    return delivery


def webhook_events_emit(events: list[WebhookEvent]) -> int:
    """Queue one delivery per event for each active endpoint that chose its type and whose organisation may see
    its object, in the caller's transaction: one INSERT of the deliveries and one dispatch, whose single outbox
    message the worker fans out once the transaction commits (market.webhooks.dispatch). The number queued."""
    if not events:
        return 0
    # The chosen events are filtered here, not by a JSON lookup, which SQLite (the embedded demo) lacks.
    active = list(WebhookEndpoint.objects.filter(is_active=True).select_related("organisation"))
    now = timezone.now()
    deliveries = [
        WebhookDelivery(
            endpoint=endpoint, event_type=event.type, payload=event.data, next_attempt_at=now
        )
        for event in events
        for endpoint in active
        if event.type in endpoint.events and event.may_see(endpoint.organisation)
    ]
    if not deliveries:
        return 0
    dispatch = WebhookDispatch.objects.create()
    for delivery in deliveries:
        delivery.dispatch = dispatch
    WebhookDelivery.objects.bulk_create(deliveries)
    outbox_add(WebhookDispatchOutbox(dispatch=dispatch))
    return len(deliveries)
