"""Pre-flight estimates (market.jobs.preflight, workers.runner.preflight) in this process (Celery eager mode):
the members fused as the job would fuse them, with simulated noise, scored against the baselines; nothing launched,
stored as noise or charged; operators only; the same request read again instead of started twice."""

import pytest

from market.budgets.models import BudgetEntry
from market.jobs.models import Job, JobEstimate, JobEstimateOutbox
from tests.conftest import api_client_for
from tests.market.jobs.conftest import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded

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


def test_an_l1_estimate_scores_simulated_draws_against_the_l0_model_and_the_baselines_and_charges_nothing(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    federation = fedkt_submissions[0].federation

    response = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=2)

    assert response.status_code == 202, response.json()
    assert response["Idempotent-Replayed"] == "false"
    body = api_client_for(operator).get(f"/api/job-estimates/{response.json()['id']}/").json()
    assert (body["status"], body["failure_reason"], body["n_draws"]) == ("succeeded", "", 2)
    assert body["progress"] == {"stage": "done", "done": 3, "total": 3, "percent": 100}
    assert body["submissions"] == [submission.id for submission in fedkt_submissions]
    result = body["result"]
    assert len(result["draws"]) == 2 and result["n_members"] == 3
    assert result["report_rows"] == 500
    accuracies = [draw["accuracy"] for draw in result["draws"]]
    assert result["private"]["accuracy"]["mean"] == pytest.approx(sum(accuracies) / 2)
    assert result["private"]["accuracy"]["min"] == min(accuracies)
    assert result["baselines"]["majority_class"]["accuracy"] == 0.756
    assert result["baselines"]["n_silos"] == 3
    assert set(body["statements"]) == {"passes_gate", "gate", "silos"}
    # nothing launched, no noisy answer stored, no budget reserved or charged
    assert not Job.objects.exists()
    assert not BudgetEntry.objects.exists()


def test_the_estimates_reference_is_the_model_the_same_job_makes_at_l0(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    """An independent check of the estimate's fusion: the job runner's own L0 job with the same parameters and seed
    fits the same model, evaluated there from its exported ONNX file in the sandbox."""
    federation = fedkt_submissions[0].federation
    estimate = ask(operator, federation, django_capture_on_commit_callbacks, **L1_REQUEST, draws=1)
    job = succeeded(
        launch(
            operator,
            federation,
            django_capture_on_commit_callbacks,
            kind="fedkt",
            privacy_level="L0",
            parameters=FAST_FEDKT,
            seed=7,
        )
    )

    reference = JobEstimate.objects.get(id=estimate.json()["id"]).result["reference"]
    model = job.global_model
    for name in ("accuracy", "balanced_accuracy"):
        assert reference[name] == pytest.approx(model.metrics[name], abs=1 / 500)
    assert reference["roc_auc"] == pytest.approx(model.metrics["roc_auc"], abs=1e-4)


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
    leaves labels near random, so it says launching is not advised."""
    federation = fedkt_submissions[0].federation
    default_l1 = {key: value for key, value in FAST_FEDKT.items() if key != "query"}
    request = {"kind": "fedkt", "privacy_level": "L1", "parameters": default_l1, "seed": 7}

    response = ask(operator, federation, django_capture_on_commit_callbacks, **request, draws=3)

    estimate = JobEstimate.objects.get(id=response.json()["id"])
    assert estimate.status == "succeeded", estimate.failure_reason
    statements = (
        api_client_for(operator).get(f"/api/job-estimates/{estimate.id}/").json()["statements"]
    )
    assert statements["passes_gate"] is False
    assert statements["gate"].startswith(
        "Launching is not advised: this job's model would fail the publish gate."
    )
    job = Job.objects.get(
        id=launch(operator, federation, django_capture_on_commit_callbacks, **request)["id"]
    )
    assert job.parameters == estimate.parameters  # the same noise, queries and final model
