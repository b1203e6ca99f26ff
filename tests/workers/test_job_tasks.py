"""Jobs under real Celery worker processes on the real broker (Redis) and PostgreSQL: the happy path, a worker
killed with SIGKILL mid-job, bad inputs, duplicate deliveries, a broker outage and cancellation."""

import os
import signal
import time

import pytest

from market.jobs.models import GlobalModel, Job, JobOutbox, JobStatus
from market.submissions.models import ModelFile
from tests.conftest import api_client_for, scaled_timeout, wait_until
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, wait_for_job

pytestmark = pytest.mark.worker


@pytest.fixture
def fast_jobs(transactional_db, settings):
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    from workers.celery_app import app

    app.control.purge()
    return settings


def assert_ran_once(job: Job) -> None:
    """What must hold however slow the machine: one succeeded job with one global model, and every claim after the
    first followed a re-queue by the reaper (a lease that expired under load), never a duplicate message. (Claims
    are counted by ``attempts``: a worker killed right after its claim may not have logged it.)"""
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    assert GlobalModel.objects.filter(job=job).count() == 1
    messages = [entry.message for entry in job.log_entries.all()]
    assert job.attempts == 1 + sum("re-queued" in message for message in messages), messages


def launch(operator, submissions, **changes) -> int:
    payload = {
        "kind": "fedkt",
        "privacy_level": "L0",
        "parameters": FAST_FEDKT,
        "seed": 5,
        **changes,
    }
    response = api_client_for(operator).post(
        f"/api/federations/{submissions[0].federation.slug}/jobs/", payload, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def test_one_worker_runs_a_job_to_one_global_model_fails_jobs_naming_the_bad_submission_and_cancels(
    fast_jobs, media_root, tmp_path, operator, fedkt_submissions
):
    """Four jobs in turn under one worker (a worker's start is most of a small job's cost): one that succeeds, one
    whose model file is corrupt, one whose model fails at predict time, and one cancelled while it runs."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from market.storage import sha256_of
    from workers.modelio.export import export_sklearn_onnx

    with job_worker(fast_jobs, media_root, tmp_path / "worker.log"):
        # The happy path: from the API to one global model.
        job = wait_for_job(launch(operator, fedkt_submissions))
        assert_ran_once(job)
        detail = api_client_for(operator).get(f"/api/jobs/{job.id}/").json()
        assert detail["progress"]["percent"] == 100
        assert [line["message"] for line in detail["log"]][-1].startswith("Succeeded: global model")

        # A corrupt model file fails the job, naming its submission.
        corrupt = fedkt_submissions[1]
        corrupt_file = ModelFile.objects.filter(submission=corrupt).first()
        corrupt_path = media_root / corrupt_file.stored_name
        intact = corrupt_path.read_bytes()
        corrupt_path.write_bytes(b"not a model any more")
        job = wait_for_job(launch(operator, fedkt_submissions))
        assert job.status == JobStatus.FAILED
        assert job.failure_reason.startswith(
            f"Submission #{corrupt.id}: its model file '{corrupt_file.original_name}' is corrupt"
        )
        assert not GlobalModel.objects.filter(job=job).exists()
        corrupt_path.write_bytes(intact)

        # A model that fails at predict time (it expects 3 features) fails the job, naming its submission.
        broken = fedkt_submissions[2]
        broken_file = ModelFile.objects.filter(submission=broken).first()
        three_features = export_sklearn_onnx(LogisticRegression().fit(np.eye(3), [0, 1, 1]), 3)
        (media_root / broken_file.stored_name).write_bytes(three_features)
        ModelFile.objects.filter(id=broken_file.id).update(sha256=sha256_of(three_features))
        job = wait_for_job(launch(operator, fedkt_submissions))
        assert job.status == JobStatus.FAILED
        assert job.failure_reason.startswith(
            f"Submission #{broken.id}: model file '{broken_file.original_name}' failed at predict time"
        )
        assert not GlobalModel.objects.filter(job=job).exists()
        assert GlobalModel.objects.count() == 1  # the first job's only

        # Cancelling a running job stops it without a global model.
        job_id = launch(operator, fedkt_submissions)
        wait_until(
            lambda: Job.objects.filter(id=job_id, status=JobStatus.RUNNING).exists(),
            timeout=60,
            interval=0.05,
            message="the job did not start",
        )
        response = api_client_for(operator).post(f"/api/jobs/{job_id}/cancel/")
        assert response.status_code == 200, response.json()
        job = wait_for_job(job_id, timeout=30)
    assert job.status == JobStatus.CANCELLED
    assert not GlobalModel.objects.filter(job_id=job_id).exists()


def test_a_worker_killed_mid_job_is_replaced_and_its_l0_and_l1_jobs_finish_once_charged_once(
    fast_jobs, media_root, tmp_path, operator, fedkt_submissions
):
    """An L0 and an L1 job running when their worker is killed (one kill, one replacement for both)."""
    from decimal import Decimal

    from market.budgets.models import PrivacyBudget

    l1_parameters = {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}
    with job_worker(fast_jobs, media_root, tmp_path / "first.log") as worker:
        job_ids = [
            launch(operator, fedkt_submissions),
            launch(operator, fedkt_submissions, privacy_level="L1", parameters=l1_parameters),
        ]
        wait_until(
            lambda: Job.objects.filter(id__in=job_ids, status=JobStatus.RUNNING).count() == 2,
            timeout=60,
            interval=0.05,
            message="the jobs did not start",
        )
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    killed = Job.objects.filter(id__in=job_ids)
    assert [job.status for job in killed] == [JobStatus.RUNNING] * 2
    with job_worker(fast_jobs, media_root, tmp_path / "second.log"):
        l0_job, l1_job = (wait_for_job(job_id, timeout=120) for job_id in job_ids)
    # The second worker finishes what the killed one held, one of two ways depending on where the kill landed:
    # the reaper re-queues the job when its lease expires (attempts 2), or the broker redelivers the killed
    # worker's unacknowledged chunk or fusion messages and the job's lease never lapses (attempts 1). Either way
    # it ran once: every claim after the first followed a re-queue, and there is one global model.
    assert_ran_once(l0_job)
    assert_ran_once(l1_job)
    # The L1 job is charged once, its reservation released; the L0 job charges nothing.
    charged = Decimal(
        str(round(l1_job.global_model.privacy_report["data_independent"]["epsilon"], 6))
    )
    for budget in PrivacyBudget.objects.all():
        assert budget.reserved == 0
        assert abs(budget.spent - charged) < Decimal("0.00001")
    assert l1_job.noise_drawn_at is not None


def test_the_same_start_delivered_three_times_runs_the_job_once(
    fast_jobs, media_root, tmp_path, operator, fedkt_submissions
):
    from workers.tasks import job_start_task

    job_id = launch(operator, fedkt_submissions)
    job_start_task.delay(job_id)
    job_start_task.delay(job_id)
    with job_worker(fast_jobs, media_root, tmp_path / "worker.log", concurrency=2):
        wait_for_job(job_id)
        time.sleep(scaled_timeout(2))  # let the duplicates reach the workers
    assert_ran_once(Job.objects.get(id=job_id))  # the two duplicates claimed nothing


def test_a_job_created_while_the_broker_is_down_runs_once_when_it_is_back(
    fast_jobs, media_root, tmp_path, operator, fedkt_submissions, private_broker
):
    job_id = launch(operator, fedkt_submissions)
    outbox = JobOutbox.objects.get(job_id=job_id)
    assert outbox.published_at is None and outbox.last_error
    assert Job.objects.get(id=job_id).status == JobStatus.QUEUED
    private_broker()
    with job_worker(fast_jobs, media_root, tmp_path / "worker.log"):
        job = wait_for_job(job_id, timeout=120)
    assert_ran_once(job)
    assert JobOutbox.objects.filter(job_id=job_id).first().published_at is not None
