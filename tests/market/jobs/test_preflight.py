"""Pre-flight estimates (market.jobs.preflight, workers.runner.preflight) in this process (Celery eager mode):
the members fused as the job would fuse them, with simulated noise, scored against the baselines; nothing launched,
stored as noise or charged; operators only; the same request read again instead of started twice."""

import pytest

from market.budgets.models import BudgetEntry
from market.jobs.models import Job, JobEstimate, JobEstimateOutbox
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch

L1_REQUEST = {
    "kind": "fedkt",
    "privacy_level": "L1",
    "parameters": {**FAST_FEDKT, "privacy": {"mechanism": "gaussian", "sigma": 2.0}},
    "seed": 7,
}


def ask(user, federation, django_capture_on_commit_callbacks, **payload):
    """POST an estimate and run what its commit queues (with ``eager_celery``: the whole estimate)."""
    with django_capture_on_commit_callbacks(execute=True):
        return api_client_for(user).post(
            f"/api/federations/{federation.slug}/job-estimates/", payload, format="json"
        )


def test_an_l1_estimate_scores_simulated_draws_against_the_reference_and_the_baselines_and_charges_nothing(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation

    response = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=2)

    assert response.status_code == 202, response.json()
    assert response["Idempotent-Replayed"] == "false"
    body = api_client_for(operator).get(f"/api/job-estimates/{response.json()['id']}/").json()
    assert (body["status"], body["failure_reason"], body["n_draws"]) == ("succeeded", "", 2)
    # the reference, two draws, then one fusion per candidate of the budget advisor (issue 40 item 4)
    fusions = 3 + len(body["result"]["candidates"])
    assert body["progress"] == {"stage": "done", "done": fusions, "total": fusions, "percent": 100}
    assert body["submissions"] == [submission.id for submission in fedkt_submissions]
    result = body["result"]
    assert len(result["draws"]) == 2 and result["n_members"] == 3
    assert result["report_rows"] == 250  # the report half, as every job's (issue 39)
    operator_only = result["baselines"]["operator_only"]
    assert (operator_only["fit_rows"], operator_only["report_rows"]) == (250, 250)
    accuracies = [draw["accuracy"] for draw in result["draws"]]
    assert result["private"]["accuracy"]["mean"] == pytest.approx(sum(accuracies) / 2)
    assert result["private"]["accuracy"]["min"] == min(accuracies)
    assert result["baselines"]["majority_class"]["accuracy"] == 0.756
    # the members' votes are simulated (issue 38 item 3): no silo is measured
    assert result["votes"] == "simulated"
    assert result["baselines"]["n_silos"] == 0
    assert result["baselines"]["best_single_silo"] is None
    assert set(body["statements"]) == {"passes_gate", "gate", "silos"}
    _assert_advice_fits_every_budget(body, federation)
    # nothing launched, no noisy answer stored, no budget reserved or charged
    assert not Job.objects.exists()
    assert not BudgetEntry.objects.exists()


def _assert_advice_fits_every_budget(body, federation):
    """The advisor's candidates: the grid's mechanisms × query counts whose least noise fits every member's
    remaining budget (here half of every silo's default limit), each scored, with the proposal among them."""
    from workers.privacy.plans import ADVISED_MECHANISMS

    candidates = body["result"]["candidates"]
    assert 1 <= len(candidates) <= 6
    assert {candidate["mechanism"] for candidate in candidates} <= set(ADVISED_MECHANISMS)
    for candidate in candidates:
        assert candidate["unit"] == "party-level" and candidate["delta"] == 1e-5
        # at most half of what each member has left (nothing spent yet: half its limit)
        assert 0 < candidate["epsilon"] <= float(federation.default_epsilon_limit) / 2 + 1e-9
        assert candidate["parameters"]["query_count"] == candidate["n_queries"]
        assert candidate["metrics"]["accuracy"] is not None
    advice = body["advice"]
    assert advice["l0"] == body["result"]["reference"]
    assert advice["operator_only"] == body["result"]["baselines"]["operator_only"]
    assert [c["passes_gate"] for c in advice["candidates"]].count(True) == (
        0
        if advice["proposal"] is None
        else len([c for c in advice["candidates"] if c["passes_gate"]])
    )
    if advice["proposal"] is not None:
        assert advice["proposal"]["passes_gate"] and advice["statement"].startswith("Proposed: ")
    else:
        assert "nothing private can beat the free model with these budgets" in advice["statement"]


def test_an_l1_estimate_never_predicts_the_silos_models_so_no_choice_reads_their_unnoised_votes(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks, monkeypatch
):
    """Issue 38 item 3: an operator who asks many L1 estimates and launches the best must not choose on the silos'
    un-noised votes, which no ε covers. Predicting any member's model in the sandbox fails the estimate here; at L2
    (members carrying the silos' own noise) the same estimate predicts them."""
    import workers.runner.chunks

    def refused(*args, **kwargs):
        raise AssertionError("an L1 estimate predicted a silo's model")

    monkeypatch.setattr(workers.runner.chunks, "_predict_chunk", refused)
    federation = fedkt_submissions[0].federation
    estimate = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=1)

    stored = JobEstimate.objects.get(id=estimate.json()["id"])
    assert (stored.status, stored.failure_reason) == ("succeeded", "")
    assert stored.result["reference"] is not None and stored.result["votes"] == "simulated"


def test_seeded_draws_repeat_exactly_and_more_draws_extend_the_same_ones(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    two = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=2)
    three = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=3)

    first = JobEstimate.objects.get(id=two.json()["id"]).result["draws"]
    second = JobEstimate.objects.get(id=three.json()["id"]).result["draws"]
    assert second[:2] == first
    assert len(second) == 3


def test_the_same_request_again_reads_the_first_estimate_and_starts_nothing(
    operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    first = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST)
    again = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST)

    assert (first.status_code, again.status_code) == (202, 200)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert (JobEstimate.objects.count(), JobEstimateOutbox.objects.count()) == (1, 1)
    assert first.json()["n_draws"] == 5  # the default


def test_an_l2_estimate_is_the_fusion_itself_without_a_reference(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from market.submissions.models import Submission

    Submission.objects.filter(id__in=[s.id for s in fedkt_submissions]).update(privacy_level="L2")
    federation = fedkt_submissions[0].federation
    response = ask(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="ensemble",
        privacy_level="L2",
        seed=3,
        draws=4,
    )

    estimate = JobEstimate.objects.get(id=response.json()["id"])
    assert (estimate.status, estimate.n_draws) == ("succeeded", 1), estimate.failure_reason
    assert estimate.result["reference"] is None
    assert len(estimate.result["draws"]) == 1
    assert estimate.result["private"]["accuracy"]["sd"] == 0.0


@pytest.mark.parametrize(
    "change, status, detail",
    [
        (
            {"privacy_level": "L0"},
            400,
            "Pre-flight estimates are for L1 and L2 jobs, not 'L0': an L0 job spends no privacy budget, so "
            "launch it and read its model's scores.",
        ),
        ({"draws": 11}, 400, "'draws' must be a whole number from 1 to 10, not 11."),
        ({"draws": 0}, 400, "'draws' must be a whole number from 1 to 10, not 0."),
        (
            {"kind": "ensemble"},
            400,
            "Server noise (L1) is only available for FedKT jobs; choose L0 or L2 for this kind.",
        ),
        (
            {"submissions": [999999]},
            400,
            "Submission #999999 does not belong to 'adult-income'.",
        ),
    ],
)
def test_bad_requests_are_refused_with_a_sentence_and_nothing_is_stored(
    operator, fedkt_submissions, django_capture_on_commit_callbacks, change, status, detail
):
    response = ask(
        operator,
        fedkt_submissions[0].federation,
        django_capture_on_commit_callbacks,
        **{**L1_REQUEST, **change},
    )

    assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert not JobEstimate.objects.exists()


def test_only_operators_ask_for_or_read_estimates(
    operator, silo_user, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation
    refused = ask(silo_user, federation, django_capture_on_commit_callbacks, **L1_REQUEST)
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith(
        "Only operators may ask for or read a pre-flight estimate"
    )
    assert not JobEstimate.objects.exists()

    estimate_id = ask(
        operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST
    ).json()["id"]
    hidden = api_client_for(silo_user).get(f"/api/job-estimates/{estimate_id}/")
    assert (hidden.status_code, hidden.json()) == (
        404,
        {"detail": f"There is no pre-flight estimate #{estimate_id} you may see."},
    )


def test_an_estimate_lost_with_its_worker_is_not_read_again_the_same_request_starts_another(
    operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    federation = fedkt_submissions[0].federation
    first = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST).json()
    estimate = JobEstimate.objects.get(id=first["id"])  # no worker here: it stays queued
    JobEstimate.objects.filter(id=estimate.id).update(
        created_at=estimate.created_at - timedelta(hours=1)
    )

    lost = api_client_for(operator).get(f"/api/job-estimates/{estimate.id}/").json()
    again = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST)

    assert lost["progress"]["stage"].startswith("lost: no worker finished it in time")
    assert again.status_code == 202 and again.json()["id"] != estimate.id


def test_the_default_l1_launch_is_estimated_with_the_noise_it_gets_and_the_estimate_says_first_whether_it_passes(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    """Issue 25: the launcher's default L1 job (no noise, no query named) on a three-silo Adult federation. Its
    estimate simulates the very noise and queries the launch then gets, and its statements say, before
    anything is spent, whether the model would pass the publish gate: party-level noise over three silos' votes
    leaves labels near random, so without semi-private students it says launching is not advised, and that launch
    is refused until answered (issue 43); with them (the L1 default since issue 40) the operator's fit-half rows
    carry the model past the gate."""
    federation = fedkt_submissions[0].federation
    default_l1 = {key: value for key, value in FAST_FEDKT.items() if key != "query"}
    request = {"kind": "fedkt", "privacy_level": "L1", "parameters": default_l1, "seed": 7}

    def statements_of(request):
        response = ask(operator, federation, django_capture_on_commit_callbacks, **request, draws=3)
        estimate = JobEstimate.objects.get(id=response.json()["id"])
        assert estimate.status == "succeeded", estimate.failure_reason
        reply = api_client_for(operator).get(f"/api/job-estimates/{estimate.id}/").json()
        return estimate, reply["statements"]

    noisy_only = {**request, "parameters": {**default_l1, "semi_private": "off"}}
    noisy_estimate, refused = statements_of(noisy_only)
    assert refused["passes_gate"] is False
    assert refused["gate"].startswith(
        "Launching is not advised: this job's model would fail the publish gate."
    )
    # issue 43: the same launch is refused before anything is reserved, until it answers the estimate
    answer = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/", noisy_only, format="json"
    )
    assert answer.status_code == 400
    assert (
        f"Pre-flight estimate #{noisy_estimate.id} of this job expects its model to fail"
        in answer.json()["detail"]
    )
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()

    estimate, statements = statements_of(request)
    assert estimate.parameters["semi_private"] == "cross_fitted"
    assert (statements["passes_gate"], statements["gate"]) == (True, None)
    job = Job.objects.get(
        id=launch(operator, federation, django_capture_on_commit_callbacks, **request)["id"]
    )
    assert job.parameters == estimate.parameters  # the same noise, queries, final model and mix


def test_an_operators_estimates_past_the_hourly_rate_are_refused_with_429_retry_after_and_a_sentence(
    operator, fedkt_submissions, django_capture_on_commit_callbacks, settings
):
    """Issue 38 item 9: a click loop of estimates held the worker for minutes. No worker here: each new estimate
    stays queued, so only the rate decides."""
    from market.accounts.services import user_create

    settings.ONEFOLD_ESTIMATES_PER_HOUR = 2
    federation = fedkt_submissions[0].federation
    first, second = (
        ask(
            operator, federation, django_capture_on_commit_callbacks, **{**L1_REQUEST, "seed": seed}
        )
        for seed in (1, 2)
    )

    refused = ask(
        operator, federation, django_capture_on_commit_callbacks, **{**L1_REQUEST, "seed": 3}
    )

    assert (first.status_code, second.status_code, refused.status_code) == (202, 202, 429)
    retry_after = int(refused["Retry-After"])
    assert 1 <= retry_after <= 1800  # the next of 2 an hour: half an hour at most
    assert refused.json() == {
        "detail": "Too many pre-flight estimates: at most 2 an hour per operator in a federation, and 30 "
        "simulated draws an hour for all of the federation's estimates. "
        f"Ask again in {retry_after} s, or with fewer draws."
    }
    assert (JobEstimate.objects.count(), JobEstimateOutbox.objects.count()) == (2, 2)
    # reading an estimate again starts nothing and takes nothing; another operator has a rate of their own
    again = ask(
        operator, federation, django_capture_on_commit_callbacks, **{**L1_REQUEST, "seed": 1}
    )
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
    colleague = user_create(
        username="oscar-operator", password="operator-password", is_operator=True
    )
    other = ask(
        colleague, federation, django_capture_on_commit_callbacks, **{**L1_REQUEST, "seed": 3}
    )
    assert other.status_code == 202


def test_a_federations_estimates_share_a_bounded_number_of_draws_an_hour(
    operator, fedkt_submissions, django_capture_on_commit_callbacks, settings
):
    """Issue 38 item 9: the draws (one fusion each) of all of a federation's estimates are bounded; a refused
    estimate uses none of them, nor of the operator's estimates."""
    settings.ONEFOLD_ESTIMATE_DRAWS_PER_HOUR = 10
    federation = fedkt_submissions[0].federation

    six = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=6)
    five = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=5)
    four = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=4)
    one = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=1)

    assert [response.status_code for response in (six, five, four, one)] == [202, 429, 202, 429]
    assert int(five["Retry-After"]) >= 1
    assert sorted(JobEstimate.objects.values_list("n_draws", flat=True)) == [4, 6]


def test_a_job_records_how_many_estimates_preceded_its_launch(
    operator, fedkt_submissions, django_capture_on_commit_callbacks, client
):
    """Issue 38 item 3: estimates asked in the federation since its previous job (a replay is the same estimate),
    on the job's row, in its API answer and on its page; the next job starts counting again."""
    federation = fedkt_submissions[0].federation
    for seed in (1, 2, 1):
        ask(
            operator, federation, django_capture_on_commit_callbacks, **{**L1_REQUEST, "seed": seed}
        )
    l0 = {"kind": "fedkt", "privacy_level": "L0", "parameters": FAST_FEDKT, "seed": 7}

    first = launch(operator, federation, django_capture_on_commit_callbacks, **l0)
    second = launch(operator, federation, django_capture_on_commit_callbacks, **l0)

    assert (first["estimates_before_launch"], second["estimates_before_launch"]) == (2, 0)
    assert Job.objects.get(id=first["id"]).estimates_before_launch == 2
    client.force_login(operator)
    page = client.get(f"/jobs/{first['id']}/").content.decode()
    assert "2 pre-flight estimates before launch" in page


def test_a_launch_whose_estimate_failed_is_refused_until_the_operator_names_that_estimate(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    """Issue 45: the estimate crashed and the launch was accepted anyway, and charged for nothing. Here the
    estimate fails for real (its worker finds the evaluation split's file gone), the file comes back, and the
    same request is refused with the estimate's reason, nothing reserved, until it names the estimate."""
    from django.core.files.storage import default_storage

    from market.storage import arrays_from_npz_cached, artifact_read

    federation = fedkt_submissions[0].federation
    request = {
        **L1_REQUEST,
        "parameters": {
            **FAST_FEDKT,
            "query": 20,
            "privacy": {"mechanism": "gaussian", "sigma": 20.0},
        },
    }
    split = federation.evaluation_splits.first().data_file
    kept = artifact_read(split)
    default_storage.delete(split)
    arrays_from_npz_cached.cache_clear()
    asked = ask(operator, federation, django_capture_on_commit_callbacks, **request, draws=1)
    estimate = JobEstimate.objects.get(id=asked.json()["id"])
    assert estimate.status == "failed" and estimate.failure_reason
    with default_storage.open(split, "wb") as restored:
        restored.write(kept)
    client = api_client_for(operator)
    jobs_url = f"/api/federations/{federation.slug}/jobs/"

    refused = client.post(jobs_url, {**request, "seed": 8}, format="json")

    assert refused.status_code == 400
    assert (
        f"Pre-flight estimate #{estimate.id} of this job failed: {estimate.failure_reason}"
        in (refused.json()["detail"])
    )
    assert f'"acknowledge_failed_estimate": {estimate.id}' in refused.json()["detail"]
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()
    wrong = client.post(
        jobs_url, {**request, "acknowledge_failed_estimate": estimate.id + 1}, format="json"
    )
    assert wrong.status_code == 400
    # another request (fewer rows queried) is not the one that failed
    other = {**request["parameters"], "query": 25}
    accepted = client.post(jobs_url, {**request, "parameters": other}, format="json")
    assert accepted.status_code == 201, accepted.json()
    launched = client.post(
        jobs_url, {**request, "acknowledge_failed_estimate": estimate.id}, format="json"
    )
    assert launched.status_code == 201, launched.json()


#: An L1 request the fixtures launch quickly (the failed-estimate test's).
QUICK_L1 = {
    **L1_REQUEST,
    "parameters": {**FAST_FEDKT, "query": 20, "privacy": {"mechanism": "gaussian", "sigma": 20.0}},
}


def test_a_launch_whose_estimate_expects_a_model_below_the_gate_is_refused_until_it_names_it_with_a_reason(
    operator, fedkt_submissions, client
):
    """Issue 43 item 1, issue 40 item 4: the default L1 job was estimated "would fail the publish gate" and launched
    with the same button, spending half the budget. Now the launch is refused, nothing reserved, with the gate's
    sentence and what to do, until it names that estimate and says why; the reason is kept on the job, audited
    and shown on the job page, and a replay of the accepted request returns the same job."""
    from market.audit.models import AuditEvent
    from market.jobs.quality import estimate_verdict
    from tests.market.jobs.helpers import BELOW_THE_GATE, succeeded_estimate

    federation = fedkt_submissions[0].federation
    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=BELOW_THE_GATE
    )
    gate = estimate_verdict(result=estimate.result, class_labels=federation.class_labels)
    api = api_client_for(operator)
    jobs_url = f"/api/federations/{federation.slug}/jobs/"

    refused = api.post(jobs_url, {**QUICK_L1, "seed": 8}, format="json")

    assert refused.status_code == 400
    assert refused.json()["detail"] == (
        f"Pre-flight estimate #{estimate.id} of this job expects its model to fail the publish gate: "
        f"{gate.gate_failure()} Launching it would spend the silos' privacy budget on a model the market will "
        "not publish without an operator's written override. Change the job and estimate it again (more queried "
        "rows or less noise where the budgets allow, another kind, or an L0 job), or launch anyway with "
        f'"launch_despite_estimate": {{"estimate": {estimate.id}, "reason": "<why you launch it anyway>"}}; '
        "the reason is kept on the job and in the audit log."
    )
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()
    assert AuditEvent.objects.filter(action="job.refused").count() == 1
    wrong = api.post(
        jobs_url,
        {**QUICK_L1, "launch_despite_estimate": {"estimate": estimate.id + 1, "reason": "Needed."}},
        format="json",
    )
    blank = api.post(
        jobs_url,
        {**QUICK_L1, "launch_despite_estimate": {"estimate": estimate.id, "reason": "   "}},
        format="json",
    )
    assert wrong.status_code == 400 and "expects its model to fail" in wrong.json()["detail"]
    assert blank.status_code == 400 and list(blank.json()) == ["launch_despite_estimate"]
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()

    answered = {
        **QUICK_L1,
        "launch_despite_estimate": {
            "estimate": estimate.id,
            "reason": "  The consortium wants the noisy labels measured once.  ",
        },
    }
    launched = api.post(jobs_url, answered, format="json", headers={"Idempotency-Key": "k-1"})
    again = api.post(jobs_url, answered, format="json", headers={"Idempotency-Key": "k-1"})

    assert launched.status_code == 201, launched.json()
    body = launched.json()
    assert body["launched_despite_estimate"] == {
        "estimate": estimate.id,
        "reason": "The consortium wants the noisy labels measured once.",
    }
    assert (again.status_code, again["Idempotent-Replayed"]) == (201, "true")
    assert again.json()["id"] == body["id"] and Job.objects.count() == 1
    job = Job.objects.get()
    assert (job.launched_despite_estimate_id, job.launch_reason) == (
        estimate.id,
        "The consortium wants the noisy labels measured once.",
    )
    audited = AuditEvent.objects.get(action="job.launched_despite_estimate")
    assert (audited.actor, audited.object_id) == (operator, str(job.id))
    assert audited.details == {
        "estimate": estimate.id,
        "reason": "The consortium wants the noisy labels measured once.",
        "gate": gate.gate_failure(),
    }
    client.force_login(operator)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert (
        f"Launched despite pre-flight estimate #{estimate.id}, which expected this job's model to fail "
        "the publish gate. olivia-operator gave this reason:"
    ) in page
    assert "The consortium wants the noisy labels measured once." in page


def test_a_refused_launch_says_what_the_advisor_proposes_or_that_nothing_private_beats_the_free_model(
    operator, fedkt_submissions
):
    """Issue 40 item 4: the refusal of a launch below the gate says what would pass (the advisor's proposal, with
    its parameters under "advice" on the estimate) or that nothing private can beat the free model."""
    from market.jobs.advice import estimate_advice
    from tests.market.jobs.helpers import ABOVE_THE_GATE, BELOW_THE_GATE, succeeded_estimate

    federation = fedkt_submissions[0].federation
    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=BELOW_THE_GATE
    )
    proposal = {
        "unit": "party-level",
        "mechanism": "gaussian",
        "n_queries": 60,
        "privacy": {"mechanism": "gaussian", "sigma": 6.5, "delta": 1e-5, "n_queries": 60},
        "epsilon": 2.5,
        "delta": 1e-5,
        "parameters": {
            **FAST_FEDKT,
            "query_count": 60,
            "privacy": {"mechanism": "gaussian", "sigma": 6.5},
        },
        "metrics": ABOVE_THE_GATE,
    }
    failing = {**proposal, "n_queries": 20, "metrics": BELOW_THE_GATE}
    jobs_url = f"/api/federations/{federation.slug}/jobs/"
    api = api_client_for(operator)
    for candidates, said in (
        (
            [failing, proposal],
            "Proposed: GNMax (Gaussian noise) on 60 queried public rows (σ 6.5 votes), ",
        ),
        ([failing], "nothing private can beat the free model with these budgets"),
    ):
        estimate.result = {
            **estimate.result,
            "candidates": candidates,
            "reference": ABOVE_THE_GATE,
        }
        estimate.save(update_fields=["result"])
        advice = estimate_advice(result=estimate.result, class_labels=federation.class_labels)

        refused = api.post(jobs_url, QUICK_L1, format="json")

        assert refused.status_code == 400
        detail = refused.json()["detail"]
        assert (
            said in advice["statement"]
            and f"written override. {advice['statement']} Change the job" in detail
        )
        shown = api.get(f"/api/job-estimates/{estimate.id}/").json()["advice"]
        assert shown["statement"] == advice["statement"]
        assert (shown["proposal"] or {}).get("parameters") == (
            proposal["parameters"] if len(candidates) == 2 else None
        )
    assert not Job.objects.exists() and not BudgetEntry.objects.exists()


def test_an_estimate_that_expects_a_model_above_the_gate_asks_for_nothing_and_a_reason_given_anyway_is_not_kept(
    operator, fedkt_submissions
):
    from market.audit.models import AuditEvent
    from tests.market.jobs.helpers import ABOVE_THE_GATE, succeeded_estimate

    federation = fedkt_submissions[0].federation
    estimate = succeeded_estimate(
        federation=federation, requested_by=operator, request=QUICK_L1, expected=ABOVE_THE_GATE
    )
    jobs_url = f"/api/federations/{federation.slug}/jobs/"
    override = {"estimate": estimate.id, "reason": "Not needed."}

    plain = api_client_for(operator).post(jobs_url, QUICK_L1, format="json")
    answered = api_client_for(operator).post(
        jobs_url, {**QUICK_L1, "launch_despite_estimate": override}, format="json"
    )

    assert (plain.status_code, answered.status_code) == (201, 201)
    assert plain.json()["launched_despite_estimate"] is None
    assert answered.json()["launched_despite_estimate"] is None
    assert not AuditEvent.objects.filter(action="job.launched_despite_estimate").exists()
