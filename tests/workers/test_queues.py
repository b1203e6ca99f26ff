"""Queues per workload under real workers: a worker started for one queue (``-Q``) takes only that workload, so
a deployment's job workers can be busy for hours while validations still run."""

import pytest
import redis
from django.conf import settings as django_settings

from market.jobs.models import Job, JobStatus
from market.submissions.models import Submission, SubmissionStatus
from tests.conftest import api_client_for, wait_until
from tests.market.jobs.conftest import FAST_FEDKT, fedkt_student_files  # noqa: F401 (fixtures)
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, wait_for_job
from tests.market.submissions.helpers import submit

pytestmark = pytest.mark.worker


def test_every_task_has_a_named_queue_and_long_work_is_acknowledged_late_one_at_a_time():
    from workers.celery_app import app

    router = app.amqp.router
    queue_of = {
        name: router.route({}, name)["queue"].name
        for name in app.tasks
        if name.startswith("onefold.")
    }
    assert "celery" not in queue_of.values(), queue_of
    assert queue_of["onefold.submission_validate"] == "validations"
    assert queue_of["onefold.job_chunk"] == queue_of["onefold.job_finalize"] == "jobs"
    assert queue_of["onefold.augmentation_train"] == "augmentations"
    assert queue_of["onefold.job_reap"] == queue_of["onefold.outbox_sweep"] == "maintenance"
    assert app.conf.worker_prefetch_multiplier == 1 and app.conf.task_acks_late is True


def test_a_validations_worker_validates_while_a_job_waits_for_a_jobs_worker(
    transactional_db,
    settings,
    media_root,
    tmp_path,
    operator,
    federation_with_data,
    silo_user,
    fedkt_student_files,  # noqa: F811
):
    from market.federations.membership import federation_join
    from workers.celery_app import app

    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    app.control.purge()
    broker = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    federation_join(federation=federation_with_data, user=silo_user)
    with job_worker(
        settings, media_root, tmp_path / "validations.log", beat=False, queues=["validations"]
    ):
        response = submit(
            api_client_for(silo_user),
            fedkt_student_files[0],
            model_family="logistic_regression",
            n_local_examples=666,
            privacy_level="L0",
        )
        assert response.status_code == 202, response.json()
        submission_id = response.json()["id"]
        wait_until(
            lambda: Submission.objects.filter(
                id=submission_id, status=SubmissionStatus.VALID
            ).exists(),
            timeout=120,
            message="the validations worker did not validate the upload",
        )
        launched = api_client_for(operator).post(
            f"/api/federations/{federation_with_data.slug}/jobs/",
            {"kind": "fedkt", "privacy_level": "L0", "parameters": FAST_FEDKT, "seed": 5},
            format="json",
        )
        assert launched.status_code == 201, launched.json()
        job_id = launched.json()["id"]
        # The job's start waits in the jobs queue: the validations worker does not take it.
        wait_until(
            lambda: broker.llen("jobs") == 1,
            timeout=30,
            message="the job's start message did not reach the jobs queue",
        )
        assert Job.objects.get(id=job_id).status == JobStatus.QUEUED
    with job_worker(settings, media_root, tmp_path / "jobs.log", queues=["jobs", "maintenance"]):
        job = wait_for_job(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    assert broker.llen("jobs") == 0
