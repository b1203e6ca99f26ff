"""Sending one webhook delivery: claim it, sign and POST it, record the attempt, and schedule a retry with
exponential backoff or give up; disable an endpoint that keeps failing. Called by the worker's task
(``onefold.webhook_deliver``), never by a request: a delivery never blocks the change that caused it.

A worker claims the delivery (pending → delivering, with a lease) before it calls, and records the outcome only
while it still holds the claim, so one delivery records at most one success (a database constraint says so too).
A worker that dies mid-call leaves the claim to expire; :func:`webhook_reap` hands the delivery back and queues it
again. The receiver may then see the same ``Onefold-Delivery`` id twice, and should treat it as one event.
"""

import json
import logging
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from market.accounts.models import User
from market.audit.services import audit_record
from market.outbox import outbox_add, outbox_published_long_ago, task_send_later
from market.webhooks.models import (
    DeliveryStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookDispatch,
    WebhookDispatchOutbox,
    WebhookEndpoint,
    WebhookOutbox,
)
from market.webhooks.outbound import Answer, webhook_post
from workers.silo.webhooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    webhook_signature,
)

logger = logging.getLogger(__name__)
DELIVER_TASK = "onefold.webhook_deliver"


def webhook_body(delivery: WebhookDelivery) -> bytes:
    """The JSON body, the same bytes at every attempt."""
    document = {
        "id": str(delivery.uuid),
        "type": delivery.event_type,
        "created_at": delivery.created_at.isoformat(),
        "data": delivery.payload,
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def webhook_headers(endpoint: WebhookEndpoint, delivery: WebhookDelivery, body: bytes) -> dict:
    timestamp = int(time.time())
    secrets = [endpoint.secret]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret and expires is not None and expires > timezone.now():
        secrets.append(endpoint.previous_secret)
    signatures = ",".join(f"v1={webhook_signature(secret, timestamp, body)}" for secret in secrets)
    return {
        SIGNATURE_HEADER: f"t={timestamp},{signatures}",
        EVENT_HEADER: delivery.event_type,
        DELIVERY_HEADER: str(delivery.uuid),
        "User-Agent": "Onefold-Webhooks/1",
    }


def retry_delay_seconds(attempt: int) -> int:
    """Exponential backoff after the ``attempt``-th failure: base × 2^(attempt-1), at most an hour."""
    return min(settings.ONEFOLD_WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempt - 1), 3600)


def _claim(delivery_id: int) -> tuple[WebhookDelivery, str] | None:
    now, claim = timezone.now(), f"{uuid.uuid4()}"
    lease = timedelta(
        seconds=settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS + 10
    )  # outlasts the attempt's deadline
    claimed = WebhookDelivery.objects.filter(
        id=delivery_id,
        status=DeliveryStatus.PENDING,
        next_attempt_at__lte=now,
        endpoint__is_active=True,
    ).update(
        status=DeliveryStatus.DELIVERING,
        claimed_by=claim,
        claim_expires_at=now + lease,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("endpoint").get(id=delivery_id), claim


def webhook_deliver(*, delivery_id: int) -> bool | None:
    """One attempt of one delivery; True when it succeeded, None when another worker holds it or it waits."""
    claimed = _claim(delivery_id)
    if claimed is None:
        return None
    delivery, claim = claimed
    body = webhook_body(delivery)
    started_at = timezone.now()
    answer = webhook_post(
        url=delivery.endpoint.url,
        body=body,
        headers=webhook_headers(delivery.endpoint, delivery, body),
    )
    return webhook_attempt_record(delivery, claim, answer, started_at)


def webhook_attempt_record(
    delivery: WebhookDelivery, claim: str, answer: Answer, started_at
) -> bool | None:
    """Record one attempt's outcome while ``claim`` still holds the delivery; schedule its retry on a failure."""
    succeeded = answer.status is not None and 200 <= answer.status < 300
    gives_up = not succeeded and delivery.attempts >= settings.ONEFOLD_WEBHOOK_MAX_ATTEMPTS
    delay = retry_delay_seconds(delivery.attempts)
    with transaction.atomic():
        held = WebhookDelivery.objects.filter(
            id=delivery.id, status=DeliveryStatus.DELIVERING, claimed_by=claim
        ).update(
            status=DeliveryStatus.SUCCEEDED
            if succeeded
            else (DeliveryStatus.FAILED if gives_up else DeliveryStatus.PENDING),
            delivered_at=timezone.now() if succeeded else None,
            next_attempt_at=timezone.now() + timedelta(seconds=delay),
            claimed_by="",
            claim_expires_at=None,
        )
        if (
            not held
        ):  # the claim expired and was handed back: this attempt's outcome is not ours to record
            logger.warning("Webhook delivery %s: claim lost before recording", delivery.id)
            return None
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=delivery.attempts,
            started_at=started_at,
            latency_ms=answer.latency_ms,
            response_status=answer.status,
            succeeded=succeeded,
            error=answer.error
            or ("" if succeeded else f"The receiver answered HTTP {answer.status}."),
        )
        _endpoint_count(delivery.endpoint_id, succeeded=succeeded)
    if not succeeded and not gives_up:
        transaction.on_commit(
            lambda: _schedule(delivery.id, countdown=delay)
        )  # also swept by webhook_reap
    return succeeded


def _schedule(delivery_id: int, *, countdown: float) -> None:
    task_send_later(DELIVER_TASK, delivery_id, countdown=countdown)  # also swept by webhook_reap


def _endpoint_count(endpoint_id: int, *, succeeded: bool) -> None:
    endpoints = WebhookEndpoint.objects.filter(id=endpoint_id)
    if succeeded:
        endpoints.exclude(consecutive_failures=0).update(consecutive_failures=0)
        return
    endpoints.update(consecutive_failures=F("consecutive_failures") + 1)
    limit = settings.ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES
    endpoint = endpoints.select_for_update().get()
    if endpoint.is_active and endpoint.consecutive_failures >= limit:
        _endpoint_disable_for_failures(endpoint, limit)


def _endpoint_disable_for_failures(endpoint: WebhookEndpoint, limit: int) -> None:
    reason = (
        f"Disabled by the market after {limit} failed attempts in a row. Fix the receiver, then enable "
        "the endpoint: the deliveries waiting for it are sent then."
    )
    endpoint.is_active, endpoint.disabled_reason, endpoint.disabled_at = (
        False,
        reason,
        timezone.now(),
    )
    endpoint.save(update_fields=["is_active", "disabled_reason", "disabled_at"])
    audit_record(
        action="webhook.auto_disabled",
        organisation=endpoint.organisation,
        target=endpoint,
        details={"url": endpoint.url, "failures": endpoint.consecutive_failures},
    )
    recipients = list(
        User.objects.filter(organisation_id=endpoint.organisation_id, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if recipients:
        message = f"Your organisation's webhook endpoint {endpoint.url} was disabled.\n\n{reason}\n"
        transaction.on_commit(
            lambda: send_mail(
                "Onefold: a webhook endpoint was disabled",
                message,
                None,
                recipients,
                fail_silently=True,
            )
        )


def webhook_reap(*, older_than_seconds: float) -> int:
    """Hand back deliveries whose worker died mid-call (claim expired), and queue again those waiting longer
    than ``older_than_seconds`` past their time with every message published as long ago (a lost message)."""
    now = timezone.now()
    WebhookDelivery.objects.filter(
        status=DeliveryStatus.DELIVERING, claim_expires_at__lt=now
    ).update(
        status=DeliveryStatus.PENDING, claimed_by="", claim_expires_at=None, next_attempt_at=now
    )
    cutoff = now - timedelta(seconds=older_than_seconds)
    waiting = WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt_at__lte=cutoff, endpoint__is_active=True
    )
    requeued = 0
    for delivery_id in outbox_published_long_ago(
        waiting, older_than_seconds=older_than_seconds
    ).values_list("id", flat=True):
        with transaction.atomic():
            outbox_add(WebhookOutbox(delivery_id=delivery_id))
        requeued += 1
    return requeued + _dispatches_requeue(waiting, older_than_seconds=older_than_seconds)


def _dispatches_requeue(waiting, *, older_than_seconds: float) -> int:
    """Queue again the dispatches of waiting deliveries that never had a message of their own (their first
    attempt was the dispatch's, and its retry message, if any, was lost), once every dispatch message is as old."""
    alone = waiting.filter(dispatch__isnull=False, outbox__isnull=True)
    dispatches = outbox_published_long_ago(
        WebhookDispatch.objects.filter(id__in=alone.values("dispatch_id")),
        older_than_seconds=older_than_seconds,
    )
    requeued = 0
    for dispatch_id in dispatches.values_list("id", flat=True):
        with transaction.atomic():
            outbox_add(WebhookDispatchOutbox(dispatch_id=dispatch_id))
        requeued += alone.filter(dispatch_id=dispatch_id).count()
    return requeued
