"""A change's deliveries as one dispatch: one outbox row, batched claims and records, connections kept alive per
checked address, and a failing receiver that gets no more POSTs from the run."""

import socket

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from market.webhooks.dispatch import webhook_dispatch
from market.webhooks.events import WebhookEvent
from market.webhooks.models import (
    DeliveryStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookDispatch,
    WebhookDispatchOutbox,
    WebhookEndpoint,
    WebhookOutbox,
)
from market.webhooks.outbound import KeptAliveConnections, webhook_post
from market.webhooks.services import webhook_events_emit

pytestmark = pytest.mark.django_db


def _endpoint(url: str, organisation) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        organisation=organisation, url=url, events=["job.succeeded"], secret="whsec_test"
    )


def _events(count: int) -> list[WebhookEvent]:
    return [
        WebhookEvent("job.succeeded", {"job": {"id": number}}, lambda organisation: True)
        for number in range(count)
    ]


def test_a_change_makes_one_dispatch_with_one_outbox_row_and_inserts_its_deliveries_at_once(
    silo_user,
):
    for number in range(3):
        _endpoint(f"https://hooks.example.org/{number}", silo_user.organisation)

    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        queued = webhook_events_emit(_events(2))

    assert queued == 6 == WebhookDelivery.objects.count()
    dispatch = WebhookDispatch.objects.get()
    assert set(WebhookDelivery.objects.values_list("dispatch", flat=True)) == {dispatch.id}
    assert list(WebhookDispatchOutbox.objects.values_list("dispatch", flat=True)) == [dispatch.id]
    assert not WebhookOutbox.objects.exists()
    inserts = [query["sql"] for query in queries if query["sql"].startswith("INSERT")]
    assert [sql.split('"')[1] for sql in inserts] == [
        "webhooks_webhookdispatch",
        "webhooks_webhookdelivery",
        "webhooks_webhookdispatchoutbox",
    ]


def test_a_change_no_endpoint_receives_makes_no_dispatch(silo_user):
    assert webhook_events_emit(_events(2)) == 0
    assert not WebhookDispatch.objects.exists() and not WebhookDispatchOutbox.objects.exists()


def test_a_dispatch_sends_over_one_kept_alive_connection_and_records_each_success_once_in_batches(
    silo_user, keep_alive_receiver, webhooks_reach_localhost
):
    _endpoint(keep_alive_receiver.url, silo_user.organisation)
    webhook_events_emit(_events(60))  # more than one batch of 50
    dispatch = WebhookDispatch.objects.get()

    with CaptureQueriesContext(connection) as queries:
        assert webhook_dispatch(dispatch_id=dispatch.id) == 60

    assert keep_alive_receiver.connections == 1
    assert sorted(keep_alive_receiver.successes_per_delivery().values()) == [1] * 60
    assert set(WebhookDelivery.objects.values_list("status", "attempts")) == {
        (DeliveryStatus.SUCCEEDED, 1)
    }
    assert WebhookAttempt.objects.filter(succeeded=True, number=1).count() == 60
    # Per batch: the claim (select, update, read back) and the record (lock, update, insert, endpoint count, in
    # a transaction); then the claim that finds nothing left. Not a statement per delivery.
    assert len(queries) <= 2 * 10 + 1


def test_a_failing_receiver_gets_no_more_posts_from_the_run_and_its_other_deliveries_wait_uncounted(
    silo_user, keep_alive_receiver, webhooks_reach_localhost
):
    _endpoint(keep_alive_receiver.url, silo_user.organisation)
    keep_alive_receiver.answers = [503]
    webhook_events_emit(_events(3))
    dispatch = WebhookDispatch.objects.get()

    assert webhook_dispatch(dispatch_id=dispatch.id) == 0

    assert [request.answered for request in keep_alive_receiver.received] == [503]
    failed, *waiting = WebhookDelivery.objects.order_by("id")
    assert (failed.status, failed.attempts) == (DeliveryStatus.PENDING, 1)
    assert [(delivery.status, delivery.attempts) for delivery in waiting] == [
        (DeliveryStatus.PENDING, 0),
        (DeliveryStatus.PENDING, 0),
    ]
    assert all(delivery.next_attempt_at > failed.created_at for delivery in waiting)
    assert list(WebhookAttempt.objects.values_list("number", "succeeded")) == [(1, False)]


def _resolving(monkeypatch, answers: list[str]) -> list[str]:
    """DNS and the network, the world outside the machine: ``hooks.example.org`` resolves to each address of
    ``answers`` in turn; every address connected to is recorded."""
    connected: list[str] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def getaddrinfo(host, port, *arguments, **keywords):
        if host != "hooks.example.org":
            return real_getaddrinfo(host, port, *arguments, **keywords)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers.pop(0), port))]

    def connect(sock, address):
        connected.append(address[0])
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return connected


def _post(url: str, connections: KeptAliveConnections):
    return webhook_post(url=url, body=b"{}", headers={}, connections=connections)


def test_a_kept_connection_is_taken_only_by_a_post_checked_again_to_the_same_address(
    keep_alive_receiver, webhooks_reach_localhost, monkeypatch
):
    """The name first resolves to the receiver's address, then to another one (a DNS answer that changed): the
    second POST is checked afresh and connects to its own checked address, not over the kept connection."""
    port = keep_alive_receiver.url.split(":")[2].split("/")[0]
    url = f"http://hooks.example.org:{port}/onefold"
    connected = _resolving(monkeypatch, ["127.0.0.1", "127.0.0.1", "127.0.0.2"])

    with KeptAliveConnections() as connections:
        answers = [_post(url, connections) for _ in range(3)]

    assert [answer.status for answer in answers[:2]] == [200, 200]
    assert connected == ["127.0.0.1", "127.0.0.2"]  # one kept connection, then the new address
    assert len(keep_alive_receiver.received) == 2 and keep_alive_receiver.connections == 1


def test_a_kept_connection_is_never_used_by_a_post_whose_fresh_check_refuses_the_address(
    keep_alive_receiver, webhooks_reach_localhost, monkeypatch
):
    port = keep_alive_receiver.url.split(":")[2].split("/")[0]
    url = f"http://hooks.example.org:{port}/onefold"
    connected = _resolving(monkeypatch, ["127.0.0.1", "127.0.0.1"])

    with KeptAliveConnections() as connections:
        first = _post(url, connections)
        webhooks_reach_localhost.ONEFOLD_WEBHOOK_ALLOW_PRIVATE = False  # loopback is now refused
        second = _post(url, connections)

    assert first.status == 200
    assert second.status is None and "127.0.0.1 is a loopback address" in second.error
    assert connected == ["127.0.0.1"]
    assert len(keep_alive_receiver.received) == 1


def test_a_receiver_that_closes_each_connection_gets_a_new_one_for_every_post(
    silo_user, receiver, webhooks_reach_localhost
):
    _endpoint(receiver.url, silo_user.organisation)
    webhook_events_emit(_events(3))

    assert webhook_dispatch(dispatch_id=WebhookDispatch.objects.get().id) == 3

    assert receiver.connections == 3 and len(receiver.received) == 3


def _lease_shorter_than_an_attempt(monkeypatch, settings):
    """A lease that a POST's deadline always outlasts: the run renews it before every POST."""
    from datetime import timedelta

    from market.webhooks import dispatch

    monkeypatch.setattr(
        dispatch,
        "_lease",
        lambda: timedelta(seconds=settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS + 0.5),
    )


def test_a_lease_a_post_might_outlast_is_renewed_before_it(
    silo_user, keep_alive_receiver, webhooks_reach_localhost, monkeypatch
):
    _lease_shorter_than_an_attempt(monkeypatch, webhooks_reach_localhost)
    _endpoint(keep_alive_receiver.url, silo_user.organisation)
    webhook_events_emit(_events(3))

    assert webhook_dispatch(dispatch_id=WebhookDispatch.objects.get().id) == 3

    assert WebhookAttempt.objects.filter(succeeded=True).count() == 3
    assert len(keep_alive_receiver.received) == 3


def test_deliveries_the_reaper_took_back_mid_run_are_not_posted_by_the_run(
    silo_user, keep_alive_receiver, webhooks_reach_localhost, monkeypatch
):
    """After the first POST the others' claims are handed back, as the reaper does with expired ones: the run's
    renewal finds them gone and sends only what it still holds."""
    from market.webhooks import dispatch

    _lease_shorter_than_an_attempt(monkeypatch, webhooks_reach_localhost)
    _endpoint(keep_alive_receiver.url, silo_user.organisation)
    webhook_events_emit(_events(3))
    real_send = dispatch._send

    def send_then_reap(delivery, connections):
        sent = real_send(delivery, connections)
        WebhookDelivery.objects.exclude(id=delivery.id).update(
            status=DeliveryStatus.PENDING, claimed_by="", claim_expires_at=None
        )
        return sent

    monkeypatch.setattr(dispatch, "_send", send_then_reap)

    assert webhook_dispatch(dispatch_id=WebhookDispatch.objects.get().id) == 1

    assert len(keep_alive_receiver.received) == 1
    assert list(WebhookDelivery.objects.order_by("id").values_list("status", flat=True)) == [
        DeliveryStatus.SUCCEEDED,
        DeliveryStatus.PENDING,
        DeliveryStatus.PENDING,
    ]
