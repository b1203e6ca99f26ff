"""Deliveries by a real Celery worker to a real HTTP receiver on 127.0.0.1: signed, retried until the receiver
recovers with one success per event, and not lost when the worker dies mid-call."""

import json

import pytest
from django.db import transaction

from market.webhooks.events import WebhookEvent
from market.webhooks.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from market.webhooks.services import webhook_events_emit
from tests.conftest import running_celery_worker, scaled_timeout, wait_until
from tests.fixtures.webhooks import webhook_worker_environment
from workers.silo.webhooks import webhook_signature_verify

pytestmark = pytest.mark.django_db(transaction=True)


def _endpoint(receiver, organisation, events=("job.succeeded",)) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        organisation=organisation, url=receiver.url, events=list(events), secret="whsec_test"
    )


def _emit(count: int) -> None:
    with transaction.atomic():
        webhook_events_emit(
            [
                WebhookEvent("job.succeeded", {"job": {"id": number}}, lambda organisation: True)
                for number in range(count)
            ]
        )


def _all_succeeded(count: int) -> bool:
    return WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == count


@pytest.fixture
def worker(webhooks_reach_localhost, media_root, tmp_path):
    from workers.celery_app import app

    app.control.purge()
    environment = webhook_worker_environment(webhooks_reach_localhost, media_root)
    with running_celery_worker(environment, tmp_path / "worker.log") as process:
        yield process


def test_a_real_worker_delivers_a_signed_event_and_retries_until_the_receiver_recovers_once_per_event(
    worker, receiver, federation_with_data, silo_user, model_files
):
    """One worker: a validated submission's event, delivered signed; then three events to a receiver whose
    first four answers fail, each delivered with exactly one success."""
    from market.submissions.services import UploadedModel, submission_create

    endpoint = _endpoint(receiver, silo_user.organisation, ["submission.validated"])
    submission = submission_create(
        federation=federation_with_data,
        user=silo_user,
        models=[UploadedModel("forest.onnx", model_files["forest.onnx"])],
        model_family="random_forest",
        n_local_examples=1000,
        local_validation_score=0.8,
        label_distribution=None,
        privacy_level="L0",
        privacy_parameters={},
        declared_epsilon=None,
    )

    wait_until(
        lambda: _all_succeeded(1) and receiver.received,
        timeout=scaled_timeout(120),
        message="the validated submission's webhook was not delivered",
    )
    request = receiver.received[0]
    assert webhook_signature_verify(
        endpoint.secret, request.headers["Onefold-Signature"], request.body
    )
    body = json.loads(request.body)
    delivery = WebhookDelivery.objects.get()
    assert request.headers["Onefold-Event"] == "submission.validated"
    assert request.headers["Onefold-Delivery"] == str(delivery.uuid) == body["id"]
    assert body["type"] == "submission.validated"
    assert body["data"]["submission"] == {
        "id": submission.id,
        "federation": federation_with_data.slug,
        "status": "valid",
        "rejection_reason": "",
    }
    attempt = WebhookAttempt.objects.get()
    assert (attempt.number, attempt.response_status, attempt.succeeded) == (1, 200, True)

    endpoint = _endpoint(receiver, silo_user.organisation)
    receiver.answers = [
        500,
        503,
        500,
        502,
    ]  # the next four calls fail, whichever events they carry

    _emit(3)

    wait_until(
        lambda: _all_succeeded(1 + 3),
        timeout=scaled_timeout(120),
        message="the deliveries did not all succeed after the receiver recovered",
    )
    assert sorted(receiver.successes_per_delivery().values()) == [1, 1, 1, 1]
    assert set(receiver.successes_per_delivery()) == {
        str(uuid) for uuid in WebhookDelivery.objects.values_list("uuid", flat=True)
    }
    retried = WebhookAttempt.objects.filter(delivery__endpoint=endpoint)
    assert retried.filter(succeeded=False).count() == 4
    assert retried.filter(succeeded=True).count() == 3
    endpoint.refresh_from_db()
    assert (endpoint.consecutive_failures, endpoint.is_active) == (0, True)


def test_a_worker_killed_mid_delivery_loses_no_event_and_records_one_success(
    webhooks_reach_localhost, media_root, tmp_path, receiver, silo_user
):
    from market.webhooks.delivery import webhook_reap
    from workers.celery_app import app

    app.control.purge()
    _endpoint(receiver, silo_user.organisation)
    receiver.hold = __import__("threading").Event()
    environment = webhook_worker_environment(webhooks_reach_localhost, media_root)
    with running_celery_worker(environment, tmp_path / "first.log") as first:
        _emit(1)
        assert receiver.arrived.wait(scaled_timeout(60)), "the first worker never called"
        first.kill()  # mid-call: the receiver has the request, the worker will never record it
        first.wait()
    receiver.hold.set()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERING, 1)

    wait_until(
        lambda: webhook_reap(older_than_seconds=0) == 1,
        timeout=scaled_timeout(60),
        message="the dead worker's claim never expired",
    )
    with running_celery_worker(environment, tmp_path / "second.log"):
        wait_until(
            lambda: _all_succeeded(1),
            timeout=scaled_timeout(60),
            message="the event was lost with the killed worker",
        )
    delivery.refresh_from_db()
    assert delivery.attempts == 2
    assert list(WebhookAttempt.objects.values_list("number", "succeeded")) == [(2, True)]
    # The receiver saw the delivery twice (the first answer went to a dead worker): one id, to deduplicate on.
    assert {request.headers["Onefold-Delivery"] for request in receiver.received} == {
        str(delivery.uuid)
    }


def test_a_worker_killed_mid_batch_loses_none_of_the_dispatch_and_records_one_success_each(
    webhooks_reach_localhost, media_root, tmp_path, receiver, silo_user
):
    """Five events of one change, one dispatch: the worker claims the batch and dies on its first POST. Every
    delivery's claim expires, the reaper queues the dispatch again, and a second worker delivers all five with one
    recorded success each."""
    import threading

    from market.webhooks.delivery import webhook_reap
    from workers.celery_app import app

    app.control.purge()
    _endpoint(receiver, silo_user.organisation)
    receiver.hold = threading.Event()
    environment = webhook_worker_environment(webhooks_reach_localhost, media_root)
    with running_celery_worker(environment, tmp_path / "first.log") as first:
        _emit(5)
        assert receiver.arrived.wait(scaled_timeout(60)), "the first worker never called"
        first.kill()  # mid-batch: one POST in flight, four claimed and not sent
        first.wait()
    receiver.hold.set()
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {
        DeliveryStatus.DELIVERING
    }

    wait_until(
        lambda: webhook_reap(older_than_seconds=0) == 5,
        timeout=scaled_timeout(60),
        message="the dead worker's claims never expired",
    )
    with running_celery_worker(environment, tmp_path / "second.log"):
        wait_until(
            lambda: _all_succeeded(5),
            timeout=scaled_timeout(60),
            message="the dispatch's deliveries were lost with the killed worker",
        )
    assert WebhookAttempt.objects.filter(succeeded=True).count() == 5
    assert not WebhookAttempt.objects.filter(succeeded=False).exists()
    assert set(receiver.successes_per_delivery()) == {
        str(uuid) for uuid in WebhookDelivery.objects.values_list("uuid", flat=True)
    }
