"""Sending a dispatch's deliveries (the deliveries one committed change made) from one task, at the receivers' pace:
claimed in batches with one UPDATE, POSTed one after another over connections kept open per checked address
(market.webhooks.outbound), and their successes recorded together, one transaction per batch.

The guarantees of market.webhooks.delivery hold for every delivery of a batch: each is claimed (pending →
delivering, with a lease) before its POST and its outcome recorded only while the claim still holds it, so it
succeeds at most once; a worker that dies leaves its claims to expire and :func:`webhook_reap` queues the dispatch
again. The lease is renewed before a POST that might outlast it. A failure is recorded at once, one delivery at a
time (backoff, the endpoint's count, its disabling), and the endpoint gets no more POSTs from this run: its other
claimed deliveries are handed back, uncounted, to wait for the first retry's time, and the dispatch is sent again
then.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Subquery
from django.utils import timezone

from market.outbox import task_send_later
from market.webhooks.delivery import (
    retry_delay_seconds,
    webhook_attempt_record,
    webhook_body,
    webhook_headers,
)
from market.webhooks.models import (
    DeliveryStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from market.webhooks.outbound import Answer, KeptAliveConnections, webhook_post

DISPATCH_TASK = "onefold.webhook_dispatch"
BATCH_SIZE = 50  # deliveries claimed by one UPDATE and recorded by one transaction


@dataclass
class Batch:
    claim: str
    deliveries: list[WebhookDelivery]
    lease_ends: datetime


@dataclass(frozen=True)
class Sent:
    delivery: WebhookDelivery
    answer: Answer
    started_at: datetime


def _lease() -> timedelta:
    return timedelta(
        seconds=settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS + 10
    )  # outlasts one attempt's deadline


def _batch_claim(dispatch_id: int) -> Batch | None:
    """Claim up to ``BATCH_SIZE`` due deliveries of the dispatch with one UPDATE, and read them back."""
    now, claim = timezone.now(), f"{uuid.uuid4()}"
    due = WebhookDelivery.objects.filter(
        dispatch_id=dispatch_id,
        status=DeliveryStatus.PENDING,
        next_attempt_at__lte=now,
        endpoint__is_active=True,
    )
    claimed = WebhookDelivery.objects.filter(
        id__in=Subquery(due.order_by("id").values("id")[:BATCH_SIZE]),
        status=DeliveryStatus.PENDING,  # checked again by the UPDATE itself: a racing worker claims none twice
    ).update(
        status=DeliveryStatus.DELIVERING,
        claimed_by=claim,
        claim_expires_at=now + _lease(),
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    deliveries = list(
        WebhookDelivery.objects.filter(dispatch_id=dispatch_id, claimed_by=claim)
        .select_related("endpoint")
        .order_by("id")
    )
    return Batch(claim, deliveries, now + _lease()) if deliveries else None


def _lease_renew(batch: Batch, delivery_ids: list[int]) -> set[int]:
    """Extend the claim of the deliveries still to send; the ids it still holds (the reaper may have taken some)."""
    now = timezone.now()
    held = WebhookDelivery.objects.filter(
        id__in=delivery_ids, status=DeliveryStatus.DELIVERING, claimed_by=batch.claim
    )
    held.update(claim_expires_at=now + _lease())
    batch.lease_ends = now + _lease()
    return set(held.values_list("id", flat=True))


def _hand_back(batch: Batch, delivery_ids: list[int], *, delay: int) -> None:
    """Release claimed deliveries that were not attempted, without counting an attempt."""
    WebhookDelivery.objects.filter(
        id__in=delivery_ids, status=DeliveryStatus.DELIVERING, claimed_by=batch.claim
    ).update(
        status=DeliveryStatus.PENDING,
        claimed_by="",
        claim_expires_at=None,
        attempts=F("attempts") - 1,
        next_attempt_at=timezone.now() + timedelta(seconds=delay),
    )


def _successes_record(batch: Batch, sent: list[Sent]) -> int:
    """Record the batch's successful attempts in one transaction, for the deliveries the claim still holds."""
    if not sent:
        return 0
    now = timezone.now()
    with transaction.atomic():
        held = set(
            WebhookDelivery.objects.select_for_update()
            .filter(
                id__in=[item.delivery.id for item in sent],
                status=DeliveryStatus.DELIVERING,
                claimed_by=batch.claim,
            )
            .values_list("id", flat=True)
        )
        WebhookDelivery.objects.filter(id__in=held).update(
            status=DeliveryStatus.SUCCEEDED,
            delivered_at=now,
            claimed_by="",
            claim_expires_at=None,
        )
        recorded = [item for item in sent if item.delivery.id in held]
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(
                delivery=item.delivery,
                number=item.delivery.attempts,
                started_at=item.started_at,
                latency_ms=item.answer.latency_ms,
                response_status=item.answer.status,
                succeeded=True,
            )
            for item in recorded
        )
        WebhookEndpoint.objects.filter(
            id__in={item.delivery.endpoint_id for item in recorded}
        ).exclude(consecutive_failures=0).update(consecutive_failures=0)
    return len(recorded)


def _send(delivery: WebhookDelivery, connections: KeptAliveConnections) -> Sent:
    body = webhook_body(delivery)
    started_at = timezone.now()
    answer = webhook_post(
        url=delivery.endpoint.url,
        body=body,
        headers=webhook_headers(delivery.endpoint, delivery, body),
        connections=connections,
    )
    return Sent(delivery, answer, started_at)


def _batch_deliver(dispatch_id: int, batch: Batch, connections: KeptAliveConnections) -> int:
    """POST each delivery of the batch; the number that succeeded."""
    succeeded: list[Sent] = []
    failed_endpoints: set[int] = set()
    remaining = list(batch.deliveries)
    while remaining:
        delivery = remaining.pop(0)
        if delivery.endpoint_id in failed_endpoints:
            _hand_back(batch, [delivery.id], delay=retry_delay_seconds(1))
            continue
        deadline = timezone.now() + timedelta(seconds=settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS + 1)
        if deadline >= batch.lease_ends:
            held = _lease_renew(batch, [delivery.id] + [item.id for item in remaining])
            remaining = [
                item for item in remaining if item.id in held
            ]  # the reaper took the others
            if delivery.id not in held:
                continue
        sent = _send(delivery, connections)
        if sent.answer.status is not None and 200 <= sent.answer.status < 300:
            succeeded.append(sent)
            continue
        webhook_attempt_record(delivery, batch.claim, sent.answer, sent.started_at)
        failed_endpoints.add(delivery.endpoint_id)
    if (
        failed_endpoints
    ):  # the handed-back deliveries are sent by this dispatch again at the first retry's time
        transaction.on_commit(
            lambda: task_send_later(DISPATCH_TASK, dispatch_id, countdown=retry_delay_seconds(1))
        )
    return _successes_record(batch, succeeded)


def webhook_dispatch(*, dispatch_id: int) -> int:
    """Send every due delivery of a dispatch, batch after batch; the number that succeeded."""
    succeeded = 0
    with KeptAliveConnections() as connections:
        while (batch := _batch_claim(dispatch_id)) is not None:
            succeeded += _batch_deliver(dispatch_id, batch, connections)
            if len(batch.deliveries) < BATCH_SIZE:  # that was all that was due
                break
    return succeeded
