"""The job launcher in a real Chromium: switching the privacy level back and forth re-fills the parameters box
from the defaults, and what is launched still means what the defaults meant (every public row stays every row)."""

import json

import pytest

from market.jobs.models import Job
from tests.frontend.test_jobs_journey import live_server  # noqa: F401 (fixture)
from tests.market.jobs.conftest import fedkt_student_files, fedkt_submissions, third_silo_user  # noqa: F401
from workers.algorithms.fedkt_fusion import DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED


@pytest.mark.browser
def test_switching_the_privacy_level_does_not_change_what_the_query_means(
    live_server,
    transactional_db,  # noqa: F811
    fedkt_submissions,
    operator,
    page,
):
    federation = fedkt_submissions[0].federation
    federation.default_parameters = {}  # the server's defaults: an L0 job queries every public row
    federation.save()
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.goto(f"{live_server.url}/sign-in/")
    page.get_by_label("Username").fill("olivia-operator")
    page.get_by_label("Password").fill("operator-password")
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/federations/{federation.slug}/jobs/new/")
    parameters = page.get_by_label("Parameters (JSON; defaults filled in)")

    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L1")
    from market.federations.selectors import public_dataset_current
    from market.jobs.parameters import job_parameter_defaults

    shown = json.loads(parameters.input_value())
    expected = job_parameter_defaults(
        kind="fedkt",
        federation=federation,
        n_public=public_dataset_current(federation=federation).n_rows,
        privacy_level="L1",
    )  # GNMax whose rows and σ fit half of a new member's ε limit
    assert shown["query_count"] == expected["query_count"] < 2000
    assert shown["privacy"]["mechanism"] == "gaussian"
    page.get_by_label("Privacy level").select_option("L0")
    shown = json.loads(parameters.input_value())
    assert (
        shown["query_fraction"] == 1 and "query" not in shown
    )  # the page wrote 1.0 as 1: still a fraction
    page.get_by_role("button", name="Launch job").click()
    page.get_by_text("queued").first.wait_for()

    job = Job.objects.get()
    assert job.privacy_level == "L0"
    assert job.parameters == {
        "partitions": 2,
        "query_fraction": 1.0,
        "final_model": {"family": "random_forest", "n_estimators": 100, "max_depth": 8},
        "vote": "auto",  # the L0 default, shown in the form and stored
        "vote_weight_max": 4,
        "query_selection": DEFAULT_QUERY_SELECTION,
        "semi_supervised": DEFAULT_SEMI_SUPERVISED,
    }
    assert script_errors == []
