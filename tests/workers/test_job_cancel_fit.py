"""Cancelling a job while its global model is being fitted, under a real Celery worker: the fit runs in a child
process (workers/jobs/interruptible.py) that the cancel stops, so the worker is free again without waiting for a
fit that could last hours."""

import re
from pathlib import Path

import pytest

from market.jobs.models import GlobalModel, JobLogEntry, JobStatus
from tests.conftest import api_client_for, wait_until
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker, wait_for_job

pytestmark = pytest.mark.worker
# Within the work limit, yet hours of training on the test machine: only a cancel ends it.
# The paper's vote: the L0 default, auto, fits eleven final models (beyond the work limit at this size).
SLOW_FIT = {
    "partitions": 2,
    "vote": "consistent_hard",
    "query_fraction": 1,
    "final_model": {"family": "mlp", "hidden_sizes": [4096, 4096], "epochs": 1000},
}


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _fitting_pid(job_id: int) -> int | None:
    entry = JobLogEntry.objects.filter(
        job_id=job_id, message__startswith="Fusing in a child process"
    ).first()
    return int(re.search(r"pid (\d+)", entry.message).group(1)) if entry else None


def test_cancelling_a_job_during_a_long_fit_stops_the_fit_and_frees_the_worker(
    transactional_db, operator, fedkt_submissions, celery_worker
):
    # The worker starts after the submissions are validated here, so that it does not race their validation.
    client = api_client_for(operator)
    created = client.post(
        f"/api/federations/{fedkt_submissions[0].federation.slug}/jobs/",
        {"kind": "fedkt", "privacy_level": "L0", "parameters": SLOW_FIT, "seed": 1},
        format="json",
    )
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    wait_until(
        lambda: _fitting_pid(job_id) is not None,
        timeout=300,
        interval=0.5,
        message="the job never started fitting its global model",
    )
    pid = _fitting_pid(job_id)
    assert _alive(pid)

    assert client.post(f"/api/jobs/{job_id}/cancel/").status_code == 200
    job = wait_for_job(job_id, timeout=120)
    assert job.status == JobStatus.CANCELLED
    wait_until(
        lambda: not _alive(pid),
        timeout=60,
        message=f"the fitting process {pid} outlived the cancel",
    )
    assert not GlobalModel.objects.filter(job_id=job_id).exists()

    # The worker is free again: the next job runs to its global model.
    quick = client.post(
        f"/api/federations/{fedkt_submissions[0].federation.slug}/jobs/",
        {
            "kind": "fedkt",
            "privacy_level": "L0",
            "seed": 2,
            "parameters": {
                "partitions": 2,
                "query": 0.25,
                "final_model": {"family": "logistic_regression"},
            },
        },
        format="json",
    )
    assert wait_for_job(quick.json()["id"], timeout=300).status == JobStatus.SUCCEEDED


def test_a_prefork_worker_fits_a_torch_global_model_in_its_child_and_gets_it_back(
    transactional_db, settings, media_root, tmp_path, operator, fedkt_submissions
):
    """Production runs Celery's prefork pool, whose processes multiprocessing sees as daemonic, and a torch network
    crosses the pipe as shared file descriptors: both must work for the fit to run in a child."""
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    client = api_client_for(operator)
    with job_worker(settings, media_root, tmp_path / "worker.log"):
        created = client.post(
            f"/api/federations/{fedkt_submissions[0].federation.slug}/jobs/",
            {
                "kind": "fedkt",
                "privacy_level": "L0",
                "seed": 3,
                "parameters": {
                    "partitions": 2,
                    "vote": "consistent_hard",  # auto might choose the ensemble, a bundle with no torch fit
                    "query_count": 200,
                    "final_model": {"family": "mlp", "hidden_sizes": [8], "epochs": 2},
                },
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        job = wait_for_job(created.json()["id"], timeout=300)
    assert job.status == JobStatus.SUCCEEDED, job.failure_reason
    assert {file.format for file in job.global_model.files.all()} == {"safetensors", "onnx"}
