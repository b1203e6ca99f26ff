"""The job launcher in a real Chromium: switching the privacy level back and forth re-fills the parameters box
from the defaults, and what is launched still means what the defaults meant (every public row stays every row);
after an estimate that failed, or that expects a model below the publish gate, Launch waits for the operator's
answer (issue 45, issue 43)."""

import json

import pytest

from market.jobs.models import Job
from tests.fixtures.jobs import FAST_FEDKT
from tests.frontend.journey_helpers import sign_in
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
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
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


def test_a_launch_whose_estimate_failed_shows_why_and_a_box_to_launch_anyway(
    operator, fedkt_submissions
):
    """Issue 45: the launcher refuses, with the estimate's reason, until the operator ticks that it has read it."""
    from django.test import Client

    from market.jobs.models import EstimateStatus, JobEstimate
    from market.jobs.services import job_request_check

    federation = fedkt_submissions[0].federation
    parameters = {**FAST_FEDKT, "query": 20, "privacy": {"mechanism": "gaussian", "sigma": 20.0}}

    checked = job_request_check(
        federation=federation,
        kind="fedkt",
        privacy_level="L1",
        parameters=parameters,
        submissions="all",
        seed=None,
    )
    estimate = JobEstimate.objects.create(
        federation=federation,
        kind="fedkt",
        privacy_level="L1",
        parameters=checked.parameters,
        seed=1,
        submission_ids=[submission.id for submission in checked.submissions],
        n_draws=1,
        public_dataset=checked.public_dataset,
        evaluation_split=checked.evaluation_split,
        requested_by=operator,
        request_sha256="0" * 64,
        status=EstimateStatus.FAILED,
        failure_reason="The fusion failed: the votes could not be combined.",
    )
    client = Client()
    client.force_login(operator)
    form = {
        "kind": "fedkt",
        "privacy_level": "L1",
        "parameters": json.dumps(parameters),
        "seed": "",
    }
    url = f"/federations/{federation.slug}/jobs/new/"

    refused = client.post(url, {**form, "idempotency_key": "first-send"})
    page = refused.content.decode()
    assert refused.status_code == 400
    assert "the votes could not be combined" in page
    assert f'name="acknowledge_failed_estimate" value="{estimate.id}"' in page
    assert not Job.objects.exists()
    launched = client.post(
        url,
        {**form, "idempotency_key": "second-send", "acknowledge_failed_estimate": str(estimate.id)},
    )
    assert launched.status_code == 302 and Job.objects.count() == 1


#: The request the launcher's gate-failing estimate is of, and the form that sends it.
QUICK_L1 = {
    "kind": "fedkt",
    "privacy_level": "L1",
    "parameters": {**FAST_FEDKT, "query": 20, "privacy": {"mechanism": "gaussian", "sigma": 20.0}},
}
REASON = "The consortium measures the noisy labels once before changing the budgets."


def test_a_launch_whose_estimate_expects_a_model_below_the_gate_waits_for_a_ticked_box_and_a_reason(
    client, operator, fedkt_submissions
):
    """Issue 43 item 1 on the page (no JavaScript here: the server decides): the estimate shown, the launcher holds
    the box and the reason beside Launch; without them the launch is refused with the estimate's sentence and what
    was typed kept; with them it launches once, the form sent again answering with the same job."""
    from tests.frontend.journey_helpers import form_key
    from tests.market.jobs.helpers import BELOW_THE_GATE, succeeded_estimate

    federation = fedkt_submissions[0].federation
    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=BELOW_THE_GATE
    )
    client.force_login(operator)
    url = f"/federations/{federation.slug}/jobs/new/"
    shown = client.get(f"{url}?estimate={estimate.id}").content.decode()
    assert 'id="estimate-gate"' in shown and 'id="launch-despite-estimate"' in shown
    assert f'name="launch_despite_estimate" value="{estimate.id}">' in shown
    assert shown.index('id="launch-despite-estimate"') < shown.index('id="launch-button"')
    form = {
        "kind": "fedkt",
        "privacy_level": "L1",
        "parameters": json.dumps(QUICK_L1["parameters"]),
        "seed": "",
        "idempotency_key": form_key(shown, 'id="job-form"'),
    }

    unticked = client.post(url, {**form, "launch_reason": REASON})
    reasonless = client.post(url, {**form, "launch_despite_estimate": str(estimate.id)})

    assert unticked.status_code == 400
    page = unticked.content.decode()
    assert (
        f"Pre-flight estimate #{estimate.id} of this job expects its model to fail the publish gate"
        in page
    )
    assert 'id="launch-despite-estimate"' in page and REASON in page  # the reason typed is kept
    assert reasonless.status_code == 400
    page = reasonless.content.decode()
    assert f"Write why you launch despite pre-flight estimate #{estimate.id}" in page
    assert f'value="{estimate.id}" checked>' in page
    assert not Job.objects.exists()

    answered = {**form, "launch_despite_estimate": str(estimate.id), "launch_reason": REASON}
    launched = client.post(url, answered)
    again = client.post(url, answered)  # Back, and Launch again

    job = Job.objects.get()
    assert launched.status_code == 302 and launched["Location"] == f"/jobs/{job.id}/"
    assert again.status_code == 302 and again["Location"] == f"/jobs/{job.id}/"
    assert (job.launched_despite_estimate_id, job.launch_reason) == (estimate.id, REASON)
    assert REASON in client.get(f"/jobs/{job.id}/").content.decode()


@pytest.mark.browser
def test_the_launcher_disables_launch_until_the_box_is_ticked_and_a_reason_written_at_both_widths(
    live_server,
    transactional_db,  # noqa: F811
    fedkt_submissions,
    operator,
    page,
):
    from tests.frontend.journey_helpers import ARTIFACTS, DESKTOP, PHONE, page_problems
    from tests.market.jobs.helpers import BELOW_THE_GATE, succeeded_estimate

    federation = fedkt_submissions[0].federation
    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=BELOW_THE_GATE
    )
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    launcher = f"{live_server.url}/federations/{federation.slug}/jobs/new/?estimate={estimate.id}"
    launch = page.get_by_role("button", name="Launch job")
    box = page.get_by_label(f"I have read estimate #{estimate.id} and launch this job anyway")
    reason = page.get_by_label("Why launch it anyway")
    problems = []
    for width, size in (("1280", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(size)
        page.goto(launcher)
        assert launch.is_disabled()
        assert page.locator("#launch-despite-needed").is_visible()
        problems += page_problems(page, f"launcher, gate-failing estimate @{width}px")
        box.check()
        assert launch.is_disabled()  # a reason too
        reason.fill("   ")
        assert launch.is_disabled()
        reason.fill(REASON)
        assert launch.is_enabled() and not page.locator("#launch-despite-needed").is_visible()
        problems += page_problems(page, f"launcher, confirmed @{width}px")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("#launch-despite-estimate").screenshot(
            path=ARTIFACTS / f"launch-despite-estimate-{width}.png"
        )
        # another request (fewer submissions) is not what the estimate speaks of: the confirmation steps aside,
        # and comes back with the estimated request
        first = page.locator('input[name="submissions"]').first
        first.uncheck()
        assert launch.is_enabled() and not page.locator("#launch-despite-estimate").is_visible()
        first.check()
        assert page.locator("#launch-despite-estimate").is_visible() and launch.is_enabled()
    assert problems == []

    launch.click()
    page.locator("#job-launched-despite-estimate").wait_for()
    assert REASON in page.locator("#job-launched-despite-estimate").inner_text()
    assert page_problems(page, "job page with the reason @390px") == []
    page.go_back()  # and Launch again: the first send's job, no second one
    if (
        launch.is_disabled()
    ):  # the browser fetched the page anew instead of restoring what was typed
        box.check()
        reason.fill(REASON)
    launch.click()
    page.locator("#job-launched-despite-estimate").wait_for()
    job = Job.objects.get()
    assert (job.launched_despite_estimate_id, job.launch_reason) == (estimate.id, REASON)
    assert script_errors == []


@pytest.mark.browser
def test_the_launcher_offers_the_engines_short_lists_as_choices_and_rounds_numbers(
    live_server,
    transactional_db,  # noqa: F811
    fedkt_submissions,
    operator,
    page,
):
    """Issue 43 item 2: family, mechanism and vote are selects of what the engine accepts (its schema stays the
    one source), numbers read rounded, and what is sent is still the box's exact value."""
    federation = fedkt_submissions[0].federation
    federation.default_parameters = {}
    federation.save()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    page.goto(f"{live_server.url}/federations/{federation.slug}/jobs/new/")
    parameters = page.get_by_label("Parameters (JSON; defaults filled in)")
    page.get_by_label("Kind").select_option("fedkt")
    page.get_by_label("Privacy level").select_option("L1")

    mechanism = page.locator("#param-privacy-mechanism")
    assert mechanism.evaluate("element => element.tagName") == "SELECT"
    assert mechanism.locator("option").all_inner_texts() == [
        "laplace",
        "gaussian",
        "confident gnmax",
    ]
    sigma = json.loads(parameters.input_value())["privacy"]["sigma"]
    shown = page.locator("#param-privacy-sigma").input_value()
    assert (
        len(shown.replace(".", "").lstrip("0")) <= 4 and abs(float(shown) - sigma) <= 1e-3 * sigma
    )
    family = page.locator("#param-final_model-family")
    assert family.evaluate("element => element.tagName") == "SELECT"
    assert "random forest" in family.locator("option").all_inner_texts()

    mechanism.select_option("laplace")
    assert json.loads(parameters.input_value())["privacy"]["mechanism"] == "laplace"
    assert json.loads(parameters.input_value())["privacy"]["sigma"] == sigma  # untouched: exact
    assert errors == []


def _shown_parameters(page: str) -> dict:
    import html
    import re

    box = re.search(r'<textarea id="field-parameters"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    return json.loads(html.unescape(box))


def _key_paths(parameters: dict, prefix: str = "") -> list[str]:
    return [
        path
        for key, value in parameters.items()
        for path in [prefix + key]
        + (_key_paths(value, prefix + key + ".") if isinstance(value, dict) else [])
    ]


def test_the_launcher_shows_one_control_per_concept_in_the_same_layout_before_and_after_an_estimate(
    operator, fedkt_submissions
):
    """The query's rows are one control (the query), not also privacy.n_queries beside it; and the estimate's
    parameters, back from PostgreSQL in its own key order, are shown in the defaults' order."""
    from django.test import Client

    from market.jobs.models import EstimateStatus, JobEstimate
    from market.jobs.services import job_request_check

    federation = fedkt_submissions[0].federation
    client = Client()
    client.force_login(operator)
    url = f"/federations/{federation.slug}/jobs/new/?kind=fedkt&privacy_level=L1"
    before = _shown_parameters(client.get(url).content.decode())
    assert "query_fraction" in before and "n_queries" not in before["privacy"]

    checked = job_request_check(
        federation=federation,
        kind="fedkt",
        privacy_level="L1",
        parameters=before,
        submissions="all",
        seed=None,
    )
    assert checked.parameters["privacy"]["n_queries"] >= 1  # derived from the query, not shown
    estimate = JobEstimate.objects.create(
        federation=federation,
        kind="fedkt",
        privacy_level="L1",
        parameters=checked.parameters,
        seed=1,
        submission_ids=[submission.id for submission in checked.submissions],
        n_draws=1,
        public_dataset=checked.public_dataset,
        evaluation_split=checked.evaluation_split,
        requested_by=operator,
        request_sha256="0" * 64,
        status=EstimateStatus.FAILED,
        failure_reason="A reason.",
    )
    stored = JobEstimate.objects.get(id=estimate.id).parameters
    assert _key_paths(stored) != _key_paths(before)  # PostgreSQL's own order (and n_queries)
    after = _shown_parameters(client.get(f"{url}&estimate={estimate.id}").content.decode())
    assert _key_paths(after) == _key_paths(before)
    assert after == before
