"""A failed job looks failed: red bar and border, the reason without Python reprs, and the launch flash gone once the
polling page learns that the job ended."""

from django.test import Client

from market.jobs.models import JobStatus
from tests.fixtures.budgets import job_row


def test_a_failed_job_page_shows_the_failure_plainly_and_clears_the_queued_flash(
    operator, federation_with_data
):
    job = job_row(federation_with_data, [], operator)
    job.status, job.progress_total, job.progress_done = JobStatus.FAILED, 4, 2
    job.failure_reason = (
        "The students predict classes [np.int64(0), np.int64(2)] but the federation has 2 classes."
    )
    job.save()
    client = Client()
    client.force_login(operator)

    page = client.get(f"/jobs/{job.id}/").content.decode()
    polled = client.get(
        f"/jobs/{job.id}/progress/", headers={"HX-Request": "true"}
    ).content.decode()

    assert "predict classes [0, 2] but" in page and "np.int64" not in page
    assert 'class="progress-failed"' in page and "failed at 40 %" in page
    assert '<div id="flash-messages" hx-swap-oob="true"></div>' in polled
    assert (
        "hx-swap-oob" not in page
    )  # a full page keeps its messages; only the live update clears them


def test_a_failed_l1_job_page_says_whether_the_silos_were_refunded_or_charged(
    operator, federation_with_data
):
    """Issue 45: the job's page says what its budget settlement was, as each silo's ledger line does."""
    from django.utils import timezone

    job = job_row(federation_with_data, [], operator)
    job.privacy_level, job.status = "L1", JobStatus.FAILED
    job.save()
    client = Client()
    client.force_login(operator)

    refunded = client.get(f"/jobs/{job.id}/").content.decode()
    job.released_at = timezone.now()
    job.save()
    charged = client.get(f"/jobs/{job.id}/").content.decode()

    assert "No silo was charged" in refunded and "every reservation was refunded" in refunded
    assert "Every participating silo was charged" in charged
