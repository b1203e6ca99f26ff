"""Shared by the job tests (service tests here, worker tests in tests/workers/test_job_tasks*.py)."""

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from market.jobs.models import Job, JobStatus
from tests.conftest import (
    WORKER_START_SECONDS,
    WORKER_STOP_SECONDS,
    api_client_for,
    scaled_timeout,
    wait_until,
    worker_environment,
)

ROOT = Path(__file__).resolve().parents[3]
FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
# Short intervals so that the reaper acts within seconds in tests.
FAST_JOB_SETTINGS = {
    "ONEFOLD_JOB_LEASE_SECONDS": 4,
    "ONEFOLD_JOB_HEARTBEAT_SECONDS": 1,
    "ONEFOLD_JOB_REAPER_SECONDS": 1,
    "ONEFOLD_JOB_OUTBOX_GRACE_SECONDS": 1,
    "ONEFOLD_JOB_CHUNK_SIZE": 1,
}


def launch(operator, federation, django_capture_on_commit_callbacks, **payload) -> dict:
    """POST a job as the operator and run what its commit queues (with ``eager_celery``: the whole job)."""
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client_for(operator).post(
            f"/api/federations/{federation.slug}/jobs/", payload, format="json"
        )
    assert response.status_code == 201, response.json()
    return response.json()


def succeeded(body: dict) -> Job:
    """The launched job, which eager Celery has run to the end: it must have succeeded."""
    job = Job.objects.get(id=body["id"])
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    return job


def wait_for_job(job_id: int, *, timeout: float = 180, statuses=FINISHED) -> Job:
    """The job once it reaches ``statuses``; ``timeout`` quiet-machine seconds with no step of progress fail."""
    wait_until(
        lambda: Job.objects.filter(id=job_id, status__in=statuses).exists(),
        timeout=timeout,
        interval=0.3,
        progress=lambda: (
            Job.objects.filter(id=job_id)
            .values_list("status", "progress_stage", "progress_done")
            .first()
        ),
        message=f"job {job_id} did not reach {statuses} in time: "
        f"{Job.objects.filter(id=job_id).values('status', 'progress_stage', 'failure_reason').first()}",
    )
    return Job.objects.get(id=job_id)


@contextmanager
def job_worker(
    settings,
    media_root,
    log_path: Path,
    *,
    beat: bool = True,
    concurrency: int = 1,
    extra_env=None,
    queues: list[str] | None = None,
):
    """A real Celery worker process (prefork) with the reaper's beat embedded (``-B``), stopped on exit; it consumes
    every queue, or only ``queues`` (``-Q``) as a deployment's workers per workload do."""
    env = {
        **worker_environment(settings, media_root),
        **{name: str(value) for name, value in FAST_JOB_SETTINGS.items()},
        "ONEFOLD_VAR_DIR": str(log_path.parent / "var"),
        **(extra_env or {}),
    }
    arguments = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.celery_app",
        "worker",
        "--concurrency",
        str(concurrency),
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "INFO",
        "-n",
        f"jobs-{log_path.stem}@%h",
    ]
    if beat:
        arguments.append("-B")
    if queues:
        arguments += ["-Q", ",".join(queues)]
    (log_path.parent / "var").mkdir(exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - the worker writes to it while it runs; closed after it stops
    worker = subprocess.Popen(
        arguments, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
    )
    try:
        wait_until(
            lambda: b" ready." in log_path.read_bytes() or worker.poll() is not None,
            timeout=WORKER_START_SECONDS,
            message="the Celery worker did not start",
            progress=lambda: log_path.stat().st_size,
        )
        assert worker.poll() is None, log_path.read_text()
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, 15)
            try:
                worker.wait(timeout=scaled_timeout(WORKER_STOP_SECONDS))
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, 9)
                worker.wait()
        log.close()


#: Why the job tests publish with an override: they test that a model runs from its package, not the gate (a small
#: test federation's model may not beat the operator's own rows: tests/market/commerce/test_publish_gate.py); a
#: reason given for a model that passes is not recorded.
PACKAGE_TEST_OVERRIDE = "Published by a test of its package, whatever the publish gate says."


def publish_model(model, *, name: str, actor):
    """A listing of ``model`` created and published by ``actor`` (publishing runs the model from its package with
    onnxruntime: market.commerce.services.listing_publish), overriding the gate (:data:`PACKAGE_TEST_OVERRIDE`)."""
    from market.commerce.services import listing_create, listing_publish

    listing = listing_create(
        global_model=model,
        name=name,
        description="",
        licence_text="Any lawful use.",
        price_cents=500,
        actor=actor,
    )
    return listing_publish(listing=listing, actor=actor, override_reason=PACKAGE_TEST_OVERRIDE)


#: The majority-class guess on the fixtures' evaluation rows (76 % '<=50K'), as an estimate's baselines hold it.
MAJORITY_BASELINE = {
    "accuracy": 0.756,
    "balanced_accuracy": 0.5,
    "macro_f1": 0.43,
    "roc_auc": 0.5,
    "class": 0,
}
#: What an estimate expects of a model that fails the publish gate (less accurate than the guess, no better
#: balanced), and of one that passes it (and beats the operator's rows alone).
BELOW_THE_GATE = {"accuracy": 0.70, "balanced_accuracy": 0.48}
ABOVE_THE_GATE = {"accuracy": 0.85, "balanced_accuracy": 0.75}


def succeeded_estimate(*, federation, requested_by, request: dict, expected: dict):
    """A succeeded pre-flight estimate of ``request`` (a job's API body: kind, privacy_level, parameters) whose
    model is expected to score ``expected`` (accuracy, balanced accuracy), stored as its worker would leave it, so
    that the launch guard can be tested without starting a worker."""
    from market.jobs.models import EstimateStatus, JobEstimate
    from market.jobs.services import job_request_check

    checked = job_request_check(
        federation=federation,
        kind=request["kind"],
        privacy_level=request["privacy_level"],
        parameters=request["parameters"],
        submissions="all",
        seed=None,
    )
    spread = {
        name: {"mean": value, "sd": 0.0, "min": value, "max": value}
        for name, value in expected.items()
    }
    return JobEstimate.objects.create(
        federation=federation,
        kind=request["kind"],
        privacy_level=request["privacy_level"],
        parameters=checked.parameters,
        seed=1,
        submission_ids=[submission.id for submission in checked.submissions],
        n_draws=1,
        public_dataset=checked.public_dataset,
        evaluation_split=checked.evaluation_split,
        requested_by=requested_by,
        request_sha256="0" * 64,
        status=EstimateStatus.SUCCEEDED,
        result={
            "private": spread,
            "draws": [expected],
            "reference": None,
            "baselines": {
                "majority_class": MAJORITY_BASELINE,
                "operator_only": {"accuracy": 0.80, "balanced_accuracy": 0.60},
                "n_silos": 3,
            },
            "n_members": 3,
            "report_rows": 250,
        },
    )


def post_job(user, federation, **payload):
    return api_client_for(user).post(
        f"/api/federations/{federation.slug}/jobs/", payload, format="json"
    )
