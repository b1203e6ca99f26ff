"""Validation gets the delivery guarantees of jobs (market.outbox): an upload made while the broker is down is
accepted and published by the sweep once the broker is back; a validation whose message was lost is queued again.
(With a real worker and a real broker outage: tests/workers/test_tasks.py.)"""

from datetime import timedelta

import pytest
from django.utils import timezone

from market.outbox import outbox_sweep
from market.submissions.models import Submission, SubmissionOutbox, SubmissionStatus
from market.submissions.validation import submission_reap
from tests.market.submissions.helpers import submit


def test_an_upload_while_the_broker_is_down_is_accepted_and_published_by_the_sweep_once_it_is_back(
    silo_api, federation_with_data, model_files, django_capture_on_commit_callbacks, monkeypatch
):
    from kombu.exceptions import OperationalError

    def broker_down(args, **options):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("workers.tasks.submission_validate_task.apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        response = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]})
    assert response.status_code == 202, response.json()
    outbox = SubmissionOutbox.objects.get(submission_id=response.json()["id"])
    assert (outbox.published_at, outbox.publish_attempts) == (None, 1)
    assert outbox.last_error == "Error 111 connecting to 127.0.0.1:6379. Connection refused."
    queued = []
    monkeypatch.setattr(
        "workers.tasks.submission_validate_task.apply_async",
        lambda args, **options: queued.append(args),
    )
    assert outbox_sweep() == 1
    assert queued == [(response.json()["id"],)]
    outbox.refresh_from_db()
    assert outbox.published_at is not None and outbox.publish_attempts == 2
    assert outbox_sweep() == 0


def test_the_reaper_queues_again_a_validation_whose_message_was_lost(
    silo_api, federation_with_data, model_files, settings, monkeypatch
):
    settings.ONEFOLD_JOB_REPUBLISH_SECONDS = 60
    submission_id = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).json()["id"]
    SubmissionOutbox.objects.update(published_at=timezone.now() - timedelta(seconds=30))
    assert submission_reap() == 0
    SubmissionOutbox.objects.update(published_at=timezone.now() - timedelta(seconds=90))
    assert submission_reap() == 1
    assert SubmissionOutbox.objects.filter(submission_id=submission_id).count() == 2
    assert submission_reap() == 0  # the new row waits for its own publication
    Submission.objects.filter(id=submission_id).update(status=SubmissionStatus.VALID)
    SubmissionOutbox.objects.update(published_at=timezone.now() - timedelta(seconds=90))
    assert submission_reap() == 0  # validated: nothing left to do


def test_a_database_hiccup_during_validation_hands_the_row_back_for_the_retry(
    silo_api, federation_with_data, model_files, monkeypatch
):
    from django.db import OperationalError

    from workers.tasks import submission_validate_task

    submission_id = submit(silo_api, {"forest.onnx": model_files["forest.onnx"]}).json()["id"]

    def hiccup(submission):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("workers.submission_validation._validation_failure", hiccup)
    with pytest.raises(
        OperationalError
    ):  # called directly, Celery's autoretry re-raises instead of scheduling
        submission_validate_task(submission_id)
    submission = Submission.objects.get(id=submission_id)
    assert (submission.status, submission.validated_by, submission.validation_started_at) == (
        SubmissionStatus.PENDING,
        "",
        None,
    )
    monkeypatch.undo()
    submission_validate_task(submission_id)  # the retry claims it and validates it
    assert Submission.objects.get(id=submission_id).status == SubmissionStatus.VALID
