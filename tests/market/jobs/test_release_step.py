"""Issue 45: an L1 job charges only what it released. Its release step (market.jobs.services.job_release) is where
something derived from its votes first leaves the worker; a job that fails before it is refunded, one that fails
after it is charged, and each silo's ledger line says which and why.

The faults are the storage's: a file the job needs is lost at a chosen moment of a real run (eager Celery, the
fusion in its child process), found by the job log line written at that moment."""

from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.core.files.storage import default_storage
from django.db.models.signals import post_save

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.jobs.lifecycle import WITHHELD_REASON
from market.jobs.models import Job, JobLogEntry, JobStatus
from market.storage import arrays_from_npz_cached
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch

L1_PARAMETERS = {**FAST_FEDKT, "query": 20, "privacy": {"gamma": 0.02}}


@contextmanager
def file_lost_when_logged(line_start: str, stored_name_of):
    """Delete ``stored_name_of(job)`` from storage as soon as the job logs a line starting with ``line_start``."""

    def lose(sender, instance, created, **kwargs):
        if created and instance.message.startswith(line_start):
            default_storage.delete(stored_name_of(instance.job))
            arrays_from_npz_cached.cache_clear()  # the process read it once already

    post_save.connect(lose, sender=JobLogEntry, weak=False)
    try:
        yield
    finally:
        post_save.disconnect(lose, sender=JobLogEntry)


def _closing_lines(job: Job):
    return list(
        BudgetEntry.objects.filter(spender_kind="job", spender_id=job.id).exclude(
            kind=EntryKind.RESERVE
        )
    )


def _launched(operator, federation, django_capture_on_commit_callbacks) -> Job:
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters=L1_PARAMETERS,
        seed=3,
    )
    return Job.objects.get(id=body["id"])


def test_a_job_that_fails_after_its_noise_but_before_its_release_refunds_every_silo(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    with file_lost_when_logged("Noise drawn", lambda job: job.evaluation_split.data_file):
        job = _launched(operator, federation, django_capture_on_commit_callbacks)

    assert job.status == JobStatus.FAILED
    assert job.noise_drawn_at is not None and job.released_at is None
    # the step's own error may carry what the noisy votes made: it stays in the worker's log
    assert job.failure_reason == WITHHELD_REASON
    assert job.noisy_answers_name == ""
    assert not default_storage.listdir(f"jobs/{job.id}")[1]  # the noisy answers are gone
    log = " ".join(job.log_entries.values_list("message", flat=True))
    assert "trained on" not in log and "accuracy" not in log
    for budget in PrivacyBudget.objects.filter(federation=federation):
        assert (budget.spent, budget.reserved) == (Decimal(0), Decimal(0))
    lines = _closing_lines(job)
    assert {line.kind for line in lines} == {EntryKind.RELEASE}
    assert all(line.reason.startswith("Refunded: the job ended (failed)") for line in lines)
    # each silo reads its refund and why on its own ledger
    silo = fedkt_submissions[0].submitted_by
    ledger = api_client_for(silo).get(f"/api/federations/{federation.slug}/budget-ledger/")
    assert ledger.status_code == 200, ledger.content
    refund = next(line for line in ledger.json() if line["kind"] == "release")
    assert (refund["job_id"], refund["reason"]) == (job.id, lines[0].reason)


@pytest.mark.parametrize("fails", [True, False], ids=["fails-after-release", "succeeds"])
def test_a_job_past_its_release_step_is_charged_whether_it_then_fails_or_succeeds(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks, fails
):
    federation = fedkt_submissions[0].federation
    # the release step writes the held report lines ("Fused ..."); the save then reads the chunks' results
    with file_lost_when_logged(
        "Fused" if fails else "never logged", lambda job: job.chunks.first().artifact_name
    ):
        job = _launched(operator, federation, django_capture_on_commit_callbacks)

    assert job.status == (JobStatus.FAILED if fails else JobStatus.SUCCEEDED)
    assert job.released_at is not None
    if fails:
        assert "partial results of chunk" in job.failure_reason  # not withheld: it released already
    charged = Decimal(str(round(job.privacy_bound["epsilon"], 6)))
    for budget in PrivacyBudget.objects.filter(federation=federation):
        assert budget.reserved == 0 and abs(budget.spent - charged) < Decimal("0.00001")
    lines = _closing_lines(job)
    assert {line.kind for line in lines} == {EntryKind.CHARGE}
    expected = (
        "Charged: the job failed after its release step"
        if fails
        else f"Charged: the job released global model #{job.global_model.id}."
    )
    assert all(line.reason.startswith(expected) for line in lines)
