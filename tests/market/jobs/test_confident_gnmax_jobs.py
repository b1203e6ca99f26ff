"""Confident-GNMax through the whole job pipeline (issue 25 item 2, Celery eager mode): the job's report, lineage and
every silo's ledger charge are the hand-computed data-independent ε (every candidate charged its check and its
answer); a job whose checks would over-spend a silo is refused before it runs; bad parameters get a JSON 400 that
says what to fix."""

import numpy as np
import pytest

from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.budgets.services import budget_limit_set, epsilon_decimal
from market.jobs.models import Job
from tests.conftest import api_client_for
from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded
from workers.privacy.rdp import RENYI_ORDERS

SIGMA, SIGMA_THRESHOLD, THRESHOLD, N_QUERIES, DELTA, SHIFT = 40.0, 30.0, 4.0, 20, 1e-5, 2
CONFIDENT = {
    "mechanism": "confident_gnmax",
    "sigma": SIGMA,
    "threshold": THRESHOLD,
    "sigma_threshold": SIGMA_THRESHOLD,
    "delta": DELTA,
}


def hand_epsilon(*, sigma_threshold: float | None) -> float:
    """Per candidate: the check α·Δ²/(2σ₁²) (none for plain GNMax) and the answer α·Δ²/σ₂²; n candidates; then
    Canonne-Kamath-Steinke's conversion."""
    alpha = RENYI_ORDERS
    check = 0.0 if sigma_threshold is None else alpha * SHIFT**2 / (2 * sigma_threshold**2)
    curve = N_QUERIES * (check + alpha * SHIFT**2 / SIGMA**2)
    return float(
        np.min(curve + np.log((alpha - 1) / alpha) - (np.log(DELTA) + np.log(alpha)) / (alpha - 1))
    )


def post_job(user, federation, parameters):
    return api_client_for(user).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "fedkt", "privacy_level": "L1", "seed": 4, "parameters": parameters},
        format="json",
    )


def test_a_confident_gnmax_job_charges_every_candidate_and_records_what_it_answered(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):  # noqa: F811
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "query": N_QUERIES, "privacy": CONFIDENT},
        seed=5,
    )
    assert body["parameters"]["privacy"] == {**CONFIDENT, "gamma": None, "n_queries": N_QUERIES}
    job = succeeded(body)
    model = job.global_model
    report = model.privacy_report["data_independent"]
    assert (
        report["mechanism"],
        report["threshold"],
        report["sigma_threshold"],
        report["sigma"],
    ) == (
        "confident_gnmax",
        THRESHOLD,
        SIGMA_THRESHOLD,
        SIGMA,
    )
    assert report["n_queries"] == N_QUERIES and report["vote_shift"] == SHIFT
    assert report["epsilon"] == pytest.approx(
        hand_epsilon(sigma_threshold=SIGMA_THRESHOLD), rel=1e-9
    )
    assert model.privacy_report["data_dependent"] is None  # never released for Confident-GNMax
    confident = model.lineage["fusion"]["confident_gnmax"]
    assert (confident["n_considered"], confident["threshold"], confident["sigma_threshold"]) == (
        N_QUERIES,
        THRESHOLD,
        SIGMA_THRESHOLD,
    )
    assert 0 < confident["n_answered"] <= N_QUERIES
    assert model.lineage["fusion"]["n_trained"] <= confident["n_answered"]
    charges = BudgetEntry.objects.filter(
        kind=EntryKind.CHARGE, spender_kind="job", spender_id=job.id
    )
    assert (
        sorted(entry.epsilon for entry in charges)
        == [epsilon_decimal(hand_epsilon(sigma_threshold=SIGMA_THRESHOLD))] * 3
    )


def test_a_job_whose_consensus_checks_would_overspend_a_silo_is_refused_before_it_runs(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    plain, confident = (
        hand_epsilon(sigma_threshold=None),
        hand_epsilon(sigma_threshold=SIGMA_THRESHOLD),
    )
    assert confident > plain + 0.2
    # Create the budgets with a first cheap job, then lower one silo's limit between plain GNMax's ε and
    # Confident-GNMax's: a ledger that charged only the answers would let the job through.
    cheap = {**FAST_FEDKT, "query": 10, "privacy": {"mechanism": "gaussian", "sigma": 1e4}}
    assert post_job(operator, federation, cheap).status_code == 201
    budget = PrivacyBudget.objects.get(organisation_id=fedkt_submissions[0].organisation_id)
    budget_limit_set(
        budget_id=budget.id,
        epsilon_limit=f"{(plain + confident) / 2:.4f}",
        reason="test",
        actor=operator,
    )
    jobs = Job.objects.count()
    refused = post_job(
        operator, federation, {**FAST_FEDKT, "query": N_QUERIES, "privacy": CONFIDENT}
    )
    assert refused.status_code == 409, refused.json()
    assert "privacy budget" in refused.json()["detail"]
    assert Job.objects.count() == jobs
    plain_job = {
        **FAST_FEDKT,
        "query": N_QUERIES,
        "privacy": {"mechanism": "gaussian", "sigma": SIGMA},
    }
    assert post_job(operator, federation, plain_job).status_code == 201  # GNMax alone fits


@pytest.mark.parametrize(
    ("privacy", "says"),
    [
        ({**CONFIDENT, "threshold": -3}, "'privacy.threshold' must be a positive number of votes"),
        (
            {**CONFIDENT, "sigma_threshold": "wide"},
            "'privacy.sigma_threshold' must be a positive number",
        ),
        ({**CONFIDENT, "threshold": 7}, "above the 6 votes a query of this job can hold"),
        ({**CONFIDENT, "sigma": 0}, "'privacy.sigma' must be a positive number"),
        (
            {"mechanism": "gaussian", "sigma": 30, "threshold": 3},
            'applies to "mechanism": "confident_gnmax" only',
        ),
        (
            {"mechanism": "pate"},
            "The noise mechanism must be one of 'laplace', 'gaussian', 'confident_gnmax'",
        ),
    ],
)
def test_bad_confident_parameters_get_a_json_400_saying_what_to_fix(
    operator, fedkt_submissions, privacy, says
):
    federation = fedkt_submissions[0].federation
    response = post_job(
        operator, federation, {**FAST_FEDKT, "query": N_QUERIES, "privacy": privacy}
    )
    assert response.status_code == 400
    assert says in response.json()["detail"]
    assert not Job.objects.exists()


def test_a_confident_job_that_names_no_noise_gets_the_default_shares_and_a_sigma_that_fits(
    operator, fedkt_submissions
):
    from market.jobs.parameters import job_parameters_validate
    from workers.privacy.costs import fedkt_l1_cost_from_parameters
    from workers.privacy.settings import (
        DEFAULT_CONFIDENT_CHECK_NOISE_RATIO,
        DEFAULT_CONFIDENT_THRESHOLD_RATIO,
    )

    federation = fedkt_submissions[0].federation
    # Fifty silos of s = 2 (100 votes a query), as on Adult: T and σ₁ are the validation-chosen shares of the
    # votes and σ₂, the queries, fit half of a new member's default limit with the checks charged.
    resolved = job_parameters_validate(
        kind="fedkt",
        privacy_level="L1",
        parameters={**FAST_FEDKT, "privacy": {"mechanism": "confident_gnmax"}},
        federation=federation,
        n_public=2000,
        n_submissions=50,
    )
    privacy = resolved["privacy"]
    assert privacy["threshold"] == pytest.approx(DEFAULT_CONFIDENT_THRESHOLD_RATIO * 100)
    assert privacy["sigma_threshold"] == pytest.approx(DEFAULT_CONFIDENT_CHECK_NOISE_RATIO * 100)
    spent = fedkt_l1_cost_from_parameters(privacy, partitions=2).report.epsilon
    assert privacy["n_queries"] >= 10 and spent <= 10 * 0.5 * (1 + 1e-9)

    # Three silos of s = 2 (6 votes): a check of σ₁ = 0.6 × 6 cannot fit at party level; calibration refuses the
    # job (400) naming a sigma_threshold that fits, rather than running it at the ratio's σ (issue 38 item 2).
    unqueried = {name: value for name, value in FAST_FEDKT.items() if name != "query"}
    response = post_job(
        operator, federation, {**unqueried, "privacy": {"mechanism": "confident_gnmax"}}
    )
    assert response.status_code == 400
    assert '"sigma_threshold" of at least' in response.json()["detail"]
    assert not Job.objects.exists()
