"""Queues per workload under real workers: a worker started for one queue (``-Q``) takes only that workload, so
a deployment's job workers can be busy for hours while validations still run."""

import json
import re
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings

from market.jobs.models import Job, JobStatus
from market.submissions.models import Submission, SubmissionStatus
from tests.conftest import api_client_for, wait_until
from tests.fixtures.jobs import FAST_FEDKT
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
    assert queue_of["onefold.webhook_deliver"] == queue_of["onefold.webhook_dispatch"] == "messages"
    assert queue_of["onefold.webhook_reap"] == "maintenance"
    assert app.conf.worker_prefetch_multiplier == 1 and app.conf.task_acks_late is True


REPOSITORY = Path(__file__).resolve().parents[2]
WORKER_COMMAND = re.compile(r"celery -A workers\.celery_app worker([^&>\n]*)")


def shipped_worker_queues(path: str) -> list[set[str]]:
    """The queues each worker started by ``path`` consumes (every queue without ``-Q``), Make variables expanded."""
    text = (REPOSITORY / path).read_text().replace("\\\n", " ")
    for name, value in re.findall(r"^(\w+) = (.*)$", text, re.MULTILINE):
        text = text.replace(f"$({name})", value.strip())
    every_queue = set(django_settings.ONEFOLD_TASK_QUEUES) | {"celery"}
    workers = []
    for arguments in WORKER_COMMAND.findall(text):
        named = re.search(r"-Q (\S+)", arguments)
        workers.append(set(named.group(1).split(",")) if named else every_queue)
    return workers


@pytest.mark.parametrize("path", ["Makefile", "docker/compose.yaml", "docs/scaling.md"])
def test_the_shipped_deployments_consume_every_queue_and_give_deliveries_a_worker_apart_from_jobs(
    path,
):
    # Issue 38 item 7: a receiver that trickled its answer held the only worker, and every job waited.
    workers = shipped_worker_queues(path)
    assert workers, f"{path} starts no worker"
    assert set().union(*workers) >= set(django_settings.ONEFOLD_TASK_QUEUES)
    for queues in workers:
        assert not ({"messages", "maintenance"} & queues and {"jobs", "validations"} & queues), (
            path,
            queues,
        )


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
        # The job's start waits in the jobs queue: the validations worker does not take it. (Looked for by name:
        # a worker starting restores messages an earlier test's killed worker held, so the count may be more.)
        wait_until(
            lambda: ("onefold.job_start", f"({job_id},)") in queued_tasks(broker, "jobs"),
            timeout=30,
            message="the job's start message did not reach the jobs queue",
        )
        assert Job.objects.get(id=job_id).status == JobStatus.QUEUED
    with job_worker(settings, media_root, tmp_path / "jobs.log", queues=["jobs", "maintenance"]):
        job = wait_for_job(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    assert ("onefold.job_start", f"({job_id},)") not in queued_tasks(broker, "jobs")


def queued_tasks(broker: redis.Redis, queue: str) -> list[tuple[str, str]]:
    """The (task, arguments) of every message waiting in ``queue`` of the Redis broker."""
    messages = [json.loads(raw)["headers"] for raw in broker.lrange(queue, 0, -1)]
    return [(headers["task"], headers["argsrepr"]) for headers in messages]


def test_a_worker_keeps_its_database_connection_from_one_task_to_the_next(
    transactional_db, settings, media_root, tmp_path
):
    # Issue 42 item 3: Celery's Django fix-up closed the connection around every task (15 % of a webhook delivery
    # was opening a new one), whatever ONEFOLD_DB_CONN_MAX_AGE said. PostgreSQL counts every session it opens.
    from django.db import connection

    from workers.celery_app import app

    def sessions() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
            )
            return cursor.fetchone()[0]

    def sweeps_done(log: Path, count: int):
        return lambda: (
            log.read_text().count("onefold.outbox_sweep[") >= 2 * count
        )  # received, succeeded

    def settled() -> int:  # the statistics reach the view a little after a session starts
        seen = [sessions()]
        wait_until(
            lambda: seen.append(sessions()) or seen[-1] == seen[-2],
            timeout=10,
            interval=1.0,
            message="PostgreSQL's session count did not settle",
        )
        return seen[-1]

    log = tmp_path / "maintenance.log"
    app.control.purge()
    with job_worker(settings, media_root, log, beat=False, queues=["maintenance"]):
        app.send_task("onefold.outbox_sweep")  # the worker's first task opens its connection
        wait_until(sweeps_done(log, 1), timeout=60, message="the first sweep did not run")
        before = settled()
        for _ in range(10):
            app.send_task("onefold.outbox_sweep")
        wait_until(
            sweeps_done(log, 11),
            timeout=120,
            message="the sweeps did not run",
            progress=lambda: log.stat().st_size,
        )
        after = settled()
    assert after - before <= 1, f"{after - before} new PostgreSQL sessions for 10 tasks"
