"""The budget advisor on the launcher (issue 40 items 4 and 5): after an L1 estimate whose model fails the gate the
launcher shows the candidates that fit every member's remaining budget and the proposal in words; its link fills
the form with the proposal, which then launches without a confirmation; where nothing passes, it says that nothing
private can beat the free model and the launch is refused with that sentence. In a real Chromium at 1280 and
390 px, axe clean. The candidates are priced by the engine on the members' real budgets (the worker's scoring of
them is covered by tests/market/jobs/test_preflight.py)."""

import json

import pytest

from market.jobs.models import Job
from tests.fixtures.jobs import FAST_FEDKT
from tests.frontend.journey_helpers import DESKTOP, PHONE, sign_in

QUICK_L1 = {
    "kind": "fedkt",
    "privacy_level": "L1",
    "parameters": {**FAST_FEDKT, "query": 20, "privacy": {"mechanism": "gaussian", "sigma": 20.0}},
}
CONFIDENT_WHY = (
    "Confident-GNMax's consensus check only costs budget here: its smaller, data-dependent ε is never released "
    "(releasing it would itself reveal the silos' vote margins), so every silo is charged the data-independent ε "
    "of every check and every answer."
)


def _estimate_with_candidates(*, federation, operator, passing: bool):
    """A gate-failing estimate of QUICK_L1 whose advisor candidates are the engine's, priced on the members' real
    remaining budgets (market.jobs.privacy_costs.member_budget_views), scored above the gate where ``passing``."""
    from market.jobs.privacy_costs import member_budget_views
    from market.submissions.models import Submission
    from tests.market.jobs.helpers import ABOVE_THE_GATE, BELOW_THE_GATE, succeeded_estimate
    from workers.algorithms import algorithm_get
    from workers.algorithms.schema import with_query_count
    from workers.privacy.plans import advised_candidates

    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=BELOW_THE_GATE
    )
    organisations = Submission.objects.filter(id__in=estimate.submission_ids).values_list(
        "organisation_id", flat=True
    )
    candidates = advised_candidates(
        kind=algorithm_get("fedkt"),
        settings=estimate.parameters,
        budgets=member_budget_views(
            federation=federation,
            organisations=list(organisations),
            kind="fedkt",
            parameters=estimate.parameters,
        ),
        delta=float(federation.default_delta),
        query_counts=[20, 60],
        most_votes=len(estimate.submission_ids) * 2,
    )
    assert candidates
    scored = [
        {
            **candidate.as_dict(),
            "parameters": {
                **with_query_count(estimate.parameters, candidate.privacy.n_queries),
                "privacy": candidate.privacy.as_dict(),
            },
            "metrics": ABOVE_THE_GATE if passing and index == 0 else BELOW_THE_GATE,
        }
        for index, candidate in enumerate(candidates)
    ]
    estimate.result = {**estimate.result, "candidates": scored, "reference": ABOVE_THE_GATE}
    estimate.save(update_fields=["result"])
    return estimate, scored


@pytest.mark.browser
def test_the_advisor_proposes_a_setting_whose_link_fills_the_form_and_launches_at_both_widths(
    live_server,
    transactional_db,
    fedkt_submissions,
    operator,
    page,
):
    from tests.frontend.journey_helpers import page_problems

    federation = fedkt_submissions[0].federation
    estimate, scored = _estimate_with_candidates(
        federation=federation, operator=operator, passing=True
    )
    proposal = scored[0]
    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    launcher = f"{live_server.url}/federations/{federation.slug}/jobs/new/?estimate={estimate.id}"
    launch = page.get_by_role("button", name="Launch job")
    problems = []
    for width, size in (("1280", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(size)
        page.goto(launcher)
        statement = page.locator("#estimate-advice-statement").inner_text()
        assert statement.startswith("Proposed: ") and "which passes the publish gate" in statement
        assert f"on {proposal['n_queries']} queried public rows" in statement
        assert page.locator("#estimate-candidates tbody tr").count() == len(scored)
        assert page.locator("#confident-gnmax-why").inner_text() == CONFIDENT_WHY
        assert (
            launch.is_disabled()
        )  # the estimated default fails the gate: it waits for a confirmation
        problems += page_problems(page, f"launcher with the advice @{width}px")
        page.get_by_role("link", name="Fill the form with the proposal").click()
        page.locator("#job-form").wait_for()
        filled = json.loads(page.locator("#field-parameters").input_value())
        assert filled["query_count"] == proposal["n_queries"]
        assert filled["privacy"]["mechanism"] == proposal["mechanism"]
        assert not page.locator("#launch-despite-estimate").is_visible()
        assert launch.is_enabled()
        problems += page_problems(page, f"launcher filled with the proposal @{width}px")
    assert problems == []

    launch.click()
    page.locator("#job-progress, .job-progress, h1").first.wait_for()
    job = Job.objects.get()
    assert job.launched_despite_estimate_id is None
    assert job.parameters["query_count"] == proposal["n_queries"]
    assert job.parameters["privacy"]["mechanism"] == proposal["mechanism"]
    assert script_errors == []


@pytest.mark.browser
def test_where_nothing_passes_the_launcher_says_so_and_a_launch_is_refused_with_that_sentence(
    client, operator, fedkt_submissions
):
    from market.budgets.models import BudgetEntry
    from tests.frontend.journey_helpers import form_key

    federation = fedkt_submissions[0].federation
    estimate, _ = _estimate_with_candidates(federation=federation, operator=operator, passing=False)
    client.force_login(operator)
    url = f"/federations/{federation.slug}/jobs/new/"
    shown = client.get(f"{url}?estimate={estimate.id}").content.decode()
    nothing = "nothing private can beat the free model with these budgets"
    assert nothing in shown and 'id="estimate-advice-use"' not in shown

    refused = client.post(
        url,
        {
            "kind": "fedkt",
            "privacy_level": "L1",
            "parameters": json.dumps(QUICK_L1["parameters"]),
            "seed": "",
            "idempotency_key": form_key(shown, 'id="job-form"'),
        },
    )

    assert refused.status_code == 400
    page = refused.content.decode()
    error = page[page.index('id="form-error"') :]
    assert nothing in error[: error.index("</p>")]
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()
