"""A real Celery worker process on the real Redis broker and PostgreSQL validates uploads end to end."""

import numpy as np
import pytest

from market.audit.models import AuditEvent
from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz, artifact_read
from market.submissions.models import ModelFile, Submission, SubmissionOutbox, SubmissionStatus
from tests.conftest import native_probabilities, wait_until
from tests.market.submissions.helpers import submit
from tests.workers.modelio.payloads import (
    TAMPERINGS,
    hostile_payloads,
    tamper_onnx_tree,
    tamper_xgboost_json,
    tamper_xgboost_ubjson,
)
from workers.tasks import submission_validate_task

pytestmark = pytest.mark.worker
FINISHED = (SubmissionStatus.VALID, SubmissionStatus.REJECTED)


def wait_for_validation(
    submission_ids: list[int], *, timeout: float = 240
) -> dict[int, Submission]:
    wait_until(
        lambda: (
            Submission.objects.filter(id__in=submission_ids, status__in=FINISHED).count()
            == len(submission_ids)
        ),
        timeout=timeout,
        interval=0.5,
        message="the worker did not validate every submission in time",
    )
    return Submission.objects.in_bulk(submission_ids)


def test_worker_validates_real_models_matching_native_predictions_and_never_runs_forged_pickles(
    celery_worker, silo_api, federation_with_data, model_files, adult_models, media_root, tmp_path
):
    """One worker: real models validated through the safe path; then rows forged past the web layer's refusal,
    so that the worker and its child meet pickles, which are refused and never run."""
    names = ["forest.onnx", "boosted.json", "network.safetensors"]
    ids = [
        submit(silo_api, {name: model_files[name]}, model_family=family).json()["id"]
        for name, family in zip(names, ["random_forest", "xgboost", "mlp"])
    ]
    submissions = wait_for_validation(ids)
    assert [submissions[id].status for id in ids] == [SubmissionStatus.VALID] * 3, [
        submissions[id].rejection_reason for id in ids
    ]
    assert {submissions[id].validated_by.split(":")[1] for id in ids} == {str(celery_worker.pid)}

    features = arrays_from_npz(federation_with_data.public_datasets.first().features_file)[
        "features"
    ]
    stored = [artifact_read(ModelFile.objects.get(submission_id=id).stored_name) for id in ids]
    native = native_probabilities(adult_models, features)
    for name, outcome in zip(names, stored_models_predict(stored, features, n_classes=2)):
        assert np.max(np.abs(outcome.probabilities - native[name])) <= 1e-5, name

    marker = tmp_path / "pwned"
    template_id = ids[0]  # the forest, validated above
    template_file = ModelFile.objects.get(submission_id=template_id)
    forged_ids = []
    for index, payload in enumerate(hostile_payloads(marker).values()):
        submission = Submission.objects.get(id=template_id)
        submission.pk, submission.status, submission.content_sha256 = (
            None,
            SubmissionStatus.PENDING,
            f"forged-{index}",
        )
        submission.save()
        stored_name = template_file.stored_name + f"-forged-{index}"
        (media_root / stored_name).write_bytes(payload)
        ModelFile.objects.create(
            submission=submission,
            position=0,
            original_name="model.onnx",
            stored_name=stored_name,
            format="onnx",
            sha256="forged",
            size_bytes=len(payload),
        )
        submission_validate_task.delay(submission.id)
        forged_ids.append(submission.id)
    forged = wait_for_validation(forged_ids)
    assert all(forged[id].status == SubmissionStatus.REJECTED for id in forged_ids)
    assert not marker.exists()


@pytest.fixture
def worker_without_structural_checks(transactional_db, settings, request):
    settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS = True
    return request.getfixturevalue("celery_worker")


# A node with two parents breaks no native library (it predicts through one of them), so only our validator
# catches it (tests/market/submissions/test_security.py); the other tamperings crash XGBoost with SIGSEGV
# or make onnxruntime refuse the model.
NATIVE_FAILURES = [kind for kind in TAMPERINGS if kind != "two_parents"]


def test_native_crashes_on_tampered_trees_are_recorded_and_the_worker_lives_on(
    worker_without_structural_checks, silo_api, federation_with_data, model_files
):
    tamperers = {
        "boosted.json": tamper_xgboost_json,
        "boosted.ubj": tamper_xgboost_ubjson,
        "forest.onnx": tamper_onnx_tree,
    }
    tampered_ids = [
        submit(silo_api, {name: tamper(model_files[name], kind)}).json()["id"]
        for name, tamper in tamperers.items()
        for kind in NATIVE_FAILURES
    ]
    good_id = submit(silo_api, {"boosted.json": model_files["boosted.json"]}).json()["id"]
    submissions = wait_for_validation(tampered_ids + [good_id], timeout=400)
    for id in tampered_ids:
        assert submissions[id].status == SubmissionStatus.REJECTED
        assert submissions[id].rejection_reason.startswith("Model file '"), submissions[
            id
        ].rejection_reason
    assert any("SIGSEGV" in submissions[id].rejection_reason for id in tampered_ids)
    assert submissions[good_id].status == SubmissionStatus.VALID
    assert {submission.validated_by for submission in submissions.values()} == {
        submissions[good_id].validated_by
    }
    assert submissions[good_id].validated_by.endswith(f":{worker_without_structural_checks.pid}")
    assert worker_without_structural_checks.poll() is None


def test_worker_validates_through_the_embedded_filesystem_broker(
    transactional_db,
    settings,
    media_root,
    tmp_path,
    silo_api,
    federation_with_data,
    model_files,
    monkeypatch,
):
    """The one-machine default: no broker server, a real worker process reading kombu's filesystem queue."""
    from celery import Celery

    from tests.conftest import running_celery_worker, worker_environment

    env = {**worker_environment(settings, media_root), "ONEFOLD_VAR_DIR": str(tmp_path / "var")}
    del env["CELERY_BROKER_URL"]
    queue, control = tmp_path / "var" / "broker" / "queue", tmp_path / "var" / "broker" / "control"
    submission_id = submit(silo_api, {"boosted.json": model_files["boosted.json"]}).json()["id"]
    monkeypatch.delenv(
        "CELERY_BROKER_URL"
    )  # Celery prefers this variable to the broker it is given
    # Not the current app: the market publishes through Celery's current app (market.outbox), and later tests in
    # this process would send their tasks to this test's folder.
    sender = Celery(broker="filesystem://", set_as_current=False)
    sender.conf.broker_transport_options = {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "control_folder": str(control),
        "store_processed": False,
    }
    with running_celery_worker(env, tmp_path / "worker.log") as worker:
        sender.send_task("onefold.submission_validate", args=[submission_id])
        submission = wait_for_validation([submission_id])[submission_id]
    assert submission.status == SubmissionStatus.VALID
    assert submission.validated_by.endswith(f":{worker.pid}")
    assert b"filesystem://" in (tmp_path / "worker.log").read_bytes()


def test_an_upload_while_the_broker_is_down_is_accepted_and_validated_once_when_it_is_back(
    transactional_db,
    settings,
    media_root,
    tmp_path,
    silo_api,
    federation_with_data,
    model_files,
    private_broker,
):
    from tests.market.jobs.helpers import job_worker

    response = submit(silo_api, {"boosted.json": model_files["boosted.json"]})
    assert response.status_code == 202, response.json()
    submission_id = response.json()["id"]
    outbox = SubmissionOutbox.objects.get(submission_id=submission_id)
    assert outbox.published_at is None and outbox.last_error
    assert Submission.objects.get(id=submission_id).status == SubmissionStatus.PENDING
    private_broker()
    with job_worker(
        settings, media_root, tmp_path / "worker.log"
    ):  # its beat runs the outbox sweep
        submission = wait_for_validation([submission_id])[submission_id]
    assert submission.status == SubmissionStatus.VALID, submission.rejection_reason
    assert (
        SubmissionOutbox.objects.filter(submission_id=submission_id).first().published_at
        is not None
    )
    assert (
        AuditEvent.objects.filter(
            action="submission.validated", object_id=str(submission_id)
        ).count()
        == 1
    )
