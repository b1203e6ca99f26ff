"""An operator estimates an L1 FedKT job's quality before spending anything, then launches a FedKT job from the web
page and watches it finish, in a real Chromium against a live server, a real Celery worker and PostgreSQL."""

import json
from pathlib import Path

import pytest

from market.jobs.models import Job, JobEstimate, JobStatus
from tests.conftest import scaled_milliseconds
from tests.fixtures.jobs import FAST_FEDKT
from tests.frontend.journey_helpers import ARTIFACTS, PHONE, page_problems, screenshots
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.mark.browser
@pytest.mark.worker
def test_operator_launches_a_fedkt_job_and_watches_it_finish(
    live_server, transactional_db, settings, media_root, tmp_path, fedkt_submissions, operator, page
):
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("olivia-operator")
    page.get_by_label("Password").fill("operator-password")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_role("link", name="Adult income").click()

    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L0")
    page.locator("#job-price").filter(has_text="L0 spends no privacy budget").wait_for()
    assert (
        '"partitions": 2'
        in page.get_by_label("Parameters (JSON; defaults filled in)").input_value()
    )
    page.get_by_text("Advanced JSON").click()
    page.get_by_label("Parameters (JSON; defaults filled in)").fill(json.dumps(FAST_FEDKT))
    page.get_by_label("Privacy level").select_option("L1")
    page.locator("#job-price").filter(has_text="Data-independent bound").wait_for()

    with job_worker(settings, media_root, tmp_path / "worker.log"):
        # Before spending: the estimate of this L1 job, polled until the worker has scored it.
        page.get_by_role("button", name="Estimate expected quality").click()
        page.locator('#job-estimate[data-status="succeeded"]').wait_for(
            timeout=scaled_milliseconds(120_000)
        )
        estimated_at = page.url
        for row in ("#estimate-private", "#estimate-reference", "#estimate-majority"):
            assert page.locator(row).is_visible()
        verdict = page.locator("#estimate-gate, #estimate-gate-passes")
        assert verdict.count() == 1
        # The verdict sits right above the Launch button.
        assert page.evaluate(
            "document.querySelector('#estimate-gate, #estimate-gate-passes').getBoundingClientRect().bottom"
            " <= document.getElementById('launch-button').getBoundingClientRect().top"
        )
        assert page_problems(page, "estimate @1280px") == []
        page.set_viewport_size(PHONE)
        assert page_problems(page, "estimate @390px") == []
        page.set_viewport_size({"width": 1280, "height": 900})
        screenshots(page, "job-estimate", ARTIFACTS)
        # Back and the button again: the form's first answer, no second estimate.
        page.go_back()
        page.get_by_role("button", name="Estimate expected quality").click()
        page.locator('#job-estimate[data-status="succeeded"]').wait_for()
        assert page.url == estimated_at and JobEstimate.objects.count() == 1

        page.get_by_label("Privacy level").select_option("L0")
        page.get_by_text("Advanced JSON").click()
        page.get_by_label("Parameters (JSON; defaults filled in)").fill(json.dumps(FAST_FEDKT))
        page.get_by_role("button", name="Launch job").click()
        page.locator("#job-status").filter(has_text="Succeeded").wait_for(
            timeout=scaled_milliseconds(120_000)
        )
    job = Job.objects.get()
    assert job.status == JobStatus.SUCCEEDED
    assert page.locator("#job-progress-bar").get_attribute("value") == "100"
    # The global model, the four baselines (majority-class guess, best and average silo, the operator's rows alone)
    # and the three submissions.
    assert page.locator("#job-metrics tbody tr").count() == 8
    assert page.locator("#job-baseline-majority-class").count() == 1
    assert page.locator("#job-baseline-operator-only").count() == 1
    page.locator("#job-comparison").wait_for()
    assert page.evaluate("document.getElementById('job-comparison').naturalWidth") == 750
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "job-fedkt-succeeded.png", full_page=True)
    assert script_errors == []
