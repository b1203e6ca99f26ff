"""FedKT's vote rules through the whole job pipeline (Celery eager mode, issue 19): an L1 class-weighted job's
report and every silo's ledger charge are the hand-computed ε of s × W votes; a soft job runs at L0 and is
refused at L1 with a sentence.
"""

import numpy as np
import pytest

from market.budgets.models import BudgetEntry, EntryKind
from market.budgets.services import epsilon_decimal
from market.jobs.models import Job
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded
from workers.privacy.rdp import RENYI_ORDERS

SIGMA, N_QUERIES, DELTA, WEIGHT = 100.0, 20, 1e-5, 4


def hand_epsilon(shift: int) -> float:
    """Two coordinates shift by Δ per query: RDP(α) = n·α·Δ²/σ², then Canonne-Kamath-Steinke's conversion."""
    alpha = RENYI_ORDERS
    curve = N_QUERIES * alpha * shift**2 / SIGMA**2
    return float(
        np.min(curve + np.log((alpha - 1) / alpha) - (np.log(DELTA) + np.log(alpha)) / (alpha - 1))
    )


def test_an_l1_class_weighted_job_charges_every_silo_s_times_w_votes(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    from market.submissions.models import Submission

    for submission, distribution in zip(fedkt_submissions, ([500, 166], [400, 266], None)):
        Submission.objects.filter(id=submission.id).update(label_distribution=distribution)
    federation = fedkt_submissions[0].federation
    parameters = {
        **FAST_FEDKT,
        "query": N_QUERIES,
        "vote": "class_weighted",
        "vote_weight_max": WEIGHT,
        "privacy": {"mechanism": "gaussian", "sigma": SIGMA, "delta": DELTA},
    }
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters=parameters,
        seed=5,
    )
    assert (body["parameters"]["vote"], body["parameters"]["vote_weight_max"]) == (
        "class_weighted",
        WEIGHT,
    )
    job = succeeded(body)
    report = job.global_model.privacy_report["data_independent"]
    assert (report["vote_shift"], report["n_queries"]) == (
        2 * WEIGHT,
        N_QUERIES,
    )  # s = 2, W = 4, one submission each
    assert report["epsilon"] == pytest.approx(hand_epsilon(2 * WEIGHT), rel=1e-9)
    charges = BudgetEntry.objects.filter(
        kind=EntryKind.CHARGE, spender_kind="job", spender_id=job.id
    )
    assert (
        sorted((entry.epsilon, entry.parameters["vote_shift"]) for entry in charges)
        == [(epsilon_decimal(hand_epsilon(2 * WEIGHT)), 2 * WEIGHT)] * 3
    )


def test_a_soft_vote_job_runs_at_l0_and_is_refused_at_l1(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters={**FAST_FEDKT, "vote": "soft"},
        seed=6,
    )
    job = succeeded(body)
    assert job.parameters["vote"] == "soft" and job.global_model.metrics["accuracy"] > 0.5

    refused = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {
            "kind": "fedkt",
            "privacy_level": "L1",
            "seed": 1,
            "parameters": {**FAST_FEDKT, "vote": "soft"},
        },
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith(
        "Soft voting cannot run at L1: a silo's summed probabilities"
    )
    assert not Job.objects.filter(privacy_level="L1").exists()


def test_an_auto_vote_job_names_its_choice_and_reports_on_the_half_it_did_not_read(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    from workers.algorithms.auto_fusion import AUTO_CANDIDATES

    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters={**FAST_FEDKT, "vote": "auto"},
        seed=8,
    )
    assert (body["parameters"]["vote"], body["parameters"]["vote_weight_max"]) == ("auto", 4)
    job = succeeded(body)
    model = job.global_model
    chosen = model.lineage["fusion"]["auto"]
    assert chosen["chosen"] in AUTO_CANDIDATES and set(chosen["candidates"]) == set(AUTO_CANDIDATES)
    assert chosen["selection_rows"] + chosen["report_rows"] == 500  # the evaluation split's rows
    assert sum(map(sum, model.metrics["confusion_matrix"])) == chosen["report_rows"]
    for metrics in model.submission_metrics.values():  # the baselines read the same rows
        assert sum(map(sum, metrics["confusion_matrix"])) == chosen["report_rows"]
    assert any("Fusion chosen by auto" in line.message for line in job.log_entries.all())
    api = api_client_for(operator).get(f"/api/global-models/{model.id}/").json()
    assert api["fusion_choice"] == {**chosen, "silos_added_nothing": None}  # a federated choice
    from django.test import Client

    browser = Client()
    browser.force_login(operator)
    page = browser.get(f"/jobs/{job.id}/").content.decode()
    assert (
        f"Fusion chosen by <code>auto</code>: <strong>{chosen['chosen']}</strong>, the best accuracy of 6 "
        f"candidates on {chosen['selection_rows']} evaluation rows"
    ) in page


def test_an_auto_vote_job_is_refused_at_l1_with_a_sentence(operator, fedkt_submissions):
    from workers.algorithms.auto_fusion import AUTO_REFUSED_AT_L1

    federation = fedkt_submissions[0].federation
    refused = api_client_for(operator).post(
        f"/api/federations/{federation.slug}/jobs/",
        {
            "kind": "fedkt",
            "privacy_level": "L1",
            "seed": 1,
            "parameters": {**FAST_FEDKT, "vote": "auto"},
        },
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json()["detail"] == AUTO_REFUSED_AT_L1
    assert not Job.objects.exists()


@pytest.fixture
def noise_submissions(
    federation_with_data, silo_user, other_silo_user, third_silo_user, adult_training
):
    """Three valid submissions whose students learnt nothing: each fitted on Adult rows with shuffled labels."""
    from sklearn.linear_model import LogisticRegression

    from market.federations.membership import federation_join
    from market.submissions.models import Submission
    from market.submissions.validation import submission_validate
    from tests.market.submissions.helpers import submit
    from workers.modelio.export import export_sklearn_onnx

    features, labels = adult_training
    generator = np.random.default_rng(0)
    ids = []
    for user in (silo_user, other_silo_user, third_silo_user):
        federation_join(federation=federation_with_data, user=user)
        files = {}
        for partition in range(2):
            rows = generator.choice(len(labels), size=300, replace=False)
            model = LogisticRegression(max_iter=300).fit(
                features[rows], generator.permutation(labels[rows])
            )
            files[f"student-{partition}.onnx"] = export_sklearn_onnx(model, features.shape[1])
        response = submit(
            api_client_for(user),
            files,
            model_family="logistic_regression",
            n_local_examples=600,
            privacy_level="L0",
        )
        assert response.status_code == 202, response.json()
        ids.append(response.json()["id"])
    for submission_id in ids:
        submission_validate(submission_id=submission_id)
    return list(Submission.objects.filter(id__in=ids).order_by("id"))


def test_an_auto_job_whose_silos_learnt_nothing_chooses_the_operators_rows_says_so_and_credits_no_silo(
    eager_celery, operator, noise_submissions, django_capture_on_commit_callbacks
):
    from django.test import Client

    from workers.algorithms.operator_only import SILOS_ADDED_NOTHING
    from workers.runner.valuing import NO_SILO_VALUED

    federation = noise_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L0",
        parameters={**FAST_FEDKT, "vote": "auto"},
        seed=8,
    )
    job = succeeded(body)
    model = job.global_model
    chosen = model.lineage["fusion"]["auto"]
    assert chosen["chosen"] == "operator_only", chosen["candidates"]
    logged = [line.message for line in job.log_entries.all()]
    assert any(
        line.startswith("Fusion chosen by auto: operator_only")
        and line.endswith(SILOS_ADDED_NOTHING)
        for line in logged
    )
    assert NO_SILO_VALUED in logged
    # no silo is credited: every weight 0, with the reason as the rule, and no contribution value
    organisations = {str(submission.organisation_id) for submission in noise_submissions}
    assert model.contribution_weights == dict.fromkeys(organisations, 0.0)
    assert model.contribution_rule == NO_SILO_VALUED
    assert model.contribution_values == {"silos": {}, "reason": NO_SILO_VALUED}
    api = api_client_for(operator).get(f"/api/global-models/{model.id}/").json()
    assert api["fusion_choice"]["silos_added_nothing"] == SILOS_ADDED_NOTHING
    browser = Client()
    browser.force_login(operator)
    page = browser.get(f"/jobs/{job.id}/").content.decode()
    assert (
        f'<p class="message" id="job-silos-added-nothing" role="note"><strong>{SILOS_ADDED_NOTHING}</strong></p>'
        in page.replace("&#x27;", "'")
    )
