"""Artifacts in S3-compatible object storage, end to end: a real S3 server on 127.0.0.1 (moto's server mode,
started as its own process, stands in for the store: S3 is a service outside the machine, and moto speaks its
HTTP API — signatures, multipart, presigned URLs — without credentials or a network), real Celery workers that
share no folder with the web process or each other, PostgreSQL and Redis.

What is proven: an upload is stored in the bucket, validated by a worker from there, fused by a job whose chunks
ran on two worker hosts with different local folders, listed, bought, and downloaded straight from the bucket
through a presigned, expiring URL after the entitlement check — and no artifact ever touched a local folder."""

import hashlib
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import boto3
import pytest
import requests

from market.jobs.models import JobChunk
from market.submissions.models import ModelFile, Submission, SubmissionStatus
from tests.conftest import api_client_for, process_stopped, scaled_timeout, wait_until
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, publish_model, wait_for_job
from tests.market.submissions.helpers import submit

pytestmark = pytest.mark.worker

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "onefold-test", "AWS_SECRET_ACCESS_KEY": "onefold-test-secret"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """An S3 server process on 127.0.0.1, for this module's tests."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("s3") / "s3.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        assert server.poll() is None, log_path.read_text()
        try:
            return requests.get(f"{endpoint}/moto-api/", timeout=5).ok
        except requests.ConnectionError:
            return False

    try:
        wait_until(answering, timeout=60, message="the S3 test server did not start")
        yield endpoint
    finally:
        process_stopped(server)


@pytest.fixture
def s3_artifacts(s3_endpoint, settings, monkeypatch):
    """This test's artifacts in a fresh private bucket, for the web process (settings) and its workers (the
    environment a worker host would be given); returns that environment and a client to look into the bucket."""
    bucket = f"onefold-{uuid.uuid4().hex[:12]}"
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    environment = {
        "ONEFOLD_STORAGE": "s3",
        "ONEFOLD_S3_BUCKET": bucket,
        "ONEFOLD_S3_ENDPOINT_URL": s3_endpoint,
        "ONEFOLD_S3_REGION": REGION,
        "ONEFOLD_S3_ADDRESSING_STYLE": "path",
        **CREDENTIALS,
    }
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION)
    client.create_bucket(Bucket=bucket)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    from market.settings import artifact_storage

    settings.STORAGES = {**settings.STORAGES, "default": artifact_storage("s3")}
    settings.ONEFOLD_PRESIGNED_DOWNLOADS = True
    return environment, client, bucket


def bucket_names(client, bucket: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def pool_pids(worker: subprocess.Popen) -> set[int]:
    """The worker's pool processes (prefork children), whose pids the chunks record."""
    with open(f"/proc/{worker.pid}/task/{worker.pid}/children") as children:
        return {int(pid) for pid in children.read().split()}


def local_files(*folders) -> list:
    return [
        path
        for folder in folders
        if folder.exists()
        for path in folder.rglob("*")
        if path.is_file()
    ]


def test_upload_validation_job_purchase_and_download_run_on_object_storage_with_two_worker_hosts(
    request,
    transactional_db,
    settings,
    tmp_path,
    media_root,
    s3_artifacts,
    operator,
    federation_with_data,
    silo_user,
    other_silo_user,
    third_silo_user,  # noqa: F811
    fedkt_student_files,  # noqa: F811
):
    from market.accounts.services import organisation_create, user_create
    from market.federations.membership import federation_join
    from workers.celery_app import app

    environment, client, bucket = s3_artifacts
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    app.control.purge()
    # Each worker host has its own local folders, shared with nothing: an artifact it needs from another process
    # can only come from the bucket.
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]
    # Scratch folders with short paths: the fusion's forkserver puts a Unix socket there (at most 107 bytes).
    scratch = [Path(tempfile.mkdtemp(prefix=f"onefold-{name}-")) for name in ("a", "b")]
    request.addfinalizer(lambda: [shutil.rmtree(folder, ignore_errors=True) for folder in scratch])
    host_environment = [
        {**environment, "TMPDIR": str(folder), "ONEFOLD_MEDIA_ROOT": str(host / "media")}
        for host, folder in zip(hosts, scratch, strict=True)
    ]
    for host in hosts:
        host.mkdir()
    with (
        job_worker(
            settings, hosts[0] / "media", hosts[0] / "a.log", extra_env=host_environment[0]
        ) as worker_a,
        job_worker(
            settings,
            hosts[1] / "media",
            hosts[1] / "b.log",
            beat=False,
            extra_env=host_environment[1],
        ) as worker_b,
    ):
        # Upload: the web process writes the students to the bucket; a worker validates them from there.
        submission_ids = []
        for user, files in zip(
            (silo_user, other_silo_user, third_silo_user), fedkt_student_files, strict=True
        ):
            federation_join(federation=federation_with_data, user=user)
            response = submit(
                api_client_for(user),
                files,
                model_family="logistic_regression",
                n_local_examples=666,
                privacy_level="L0",
            )
            assert response.status_code == 202, response.json()
            submission_ids.append(response.json()["id"])
        wait_until(
            lambda: (
                Submission.objects.filter(
                    id__in=submission_ids, status=SubmissionStatus.VALID
                ).count()
                == len(submission_ids)
            ),
            timeout=180,
            message="the workers did not validate the uploads from the bucket: "
            f"{list(Submission.objects.values('status', 'rejection_reason'))}",
            progress=lambda: list(Submission.objects.values_list("status", flat=True)),
        )
        stored = ModelFile.objects.filter(submission_id__in=submission_ids)
        assert {model_file.stored_name for model_file in stored} <= set(
            bucket_names(client, bucket)
        )

        # A job whose three chunks (one submission each) are shared by the two hosts.
        response = api_client_for(operator).post(
            f"/api/federations/{federation_with_data.slug}/jobs/",
            {"kind": "fedkt", "privacy_level": "L0", "parameters": FAST_FEDKT, "seed": 5},
            format="json",
        )
        assert response.status_code == 201, response.json()
        job = wait_for_job(response.json()["id"], timeout=240)
        pool_processes = [pool_pids(worker_a), pool_pids(worker_b)]
    assert job.status == "succeeded", job.failure_reason
    chunk_pids = {
        int(name.rsplit(":", 1)[1])
        for name in JobChunk.objects.filter(job=job).values_list("worker", flat=True)
    }
    assert all(chunk_pids & host_pids for host_pids in pool_processes), (chunk_pids, pool_processes)
    global_model = job.global_model
    model_file = global_model.files.get(format="onnx")
    assert model_file.stored_name in bucket_names(client, bucket)

    # Listed, bought, and downloaded from the bucket through a presigned URL.
    listing = publish_model(global_model, name="Fused on object storage", actor=operator)
    buyer = user_create(
        username="s3-buyer",
        password="buyer-password-s3",
        organisation=organisation_create(name="Bucket Buyer", is_silo=False, is_buyer=True),
    )
    operator_api = api_client_for(operator)
    credited = operator_api.post(
        f"/api/organisations/{buyer.organisation_id}/wallet/top-ups/",
        {"amount_cents": 10_000, "reference": "s3-test-payment"},
        format="json",
    )
    assert credited.status_code == 201, credited.json()
    buyer_api = api_client_for(buyer)
    bought = buyer_api.post(f"/api/listings/{listing.id}/purchase/")
    assert bought.status_code == 201, bought.json()
    link = buyer_api.post(
        f"/api/global-models/{global_model.id}/download-links/", {"format": "onnx"}, format="json"
    )
    assert link.status_code == 201, link.json()
    redirect = buyer_api.get(link.json()["url"])
    assert redirect.status_code == 302
    presigned = redirect["Location"]
    assert presigned.startswith(environment["ONEFOLD_S3_ENDPOINT_URL"])
    assert "X-Amz-Signature=" in presigned
    lifetime = int(presigned.split("X-Amz-Expires=")[1].split("&")[0])
    assert 1 <= lifetime <= settings.ONEFOLD_PRESIGNED_SECONDS  # never longer than the link either
    delivered = requests.get(presigned, timeout=scaled_timeout(30))
    assert delivered.status_code == 200
    assert hashlib.sha256(delivered.content).hexdigest() == model_file.sha256
    assert redirect["X-Content-SHA256"] == model_file.sha256
    assert "attachment" in delivered.headers["Content-Disposition"]
    # The bucket is private: the same object without the signature is refused.
    assert requests.get(presigned.split("?")[0], timeout=scaled_timeout(30)).status_code == 403

    # Nothing was written to a local folder by the web process or either worker host.
    assert local_files(media_root, *(host / "media" for host in hosts)) == []
