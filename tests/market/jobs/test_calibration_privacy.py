"""Issue 38 items 1 and 2: what a calibrated L1 job's σ and query count may tell, and what it may not spend.

1. A silo reading a job (``GET /api/jobs/<id>/``, the jobs list) must not recover another silo's remaining budget
   from its σ or queries: calibration fits a new member's share of the federation's default limit only, and a job
   a silo cannot afford is refused by the reservation (naming to a non-operator only its own silo).
2. A Confident-GNMax job that names no σ and whose checks fit nothing is refused (400) naming a ``sigma_threshold``
   that fits, never run at the ratio's σ; a default limit so small that only pure noise would fit is refused too.
"""

import math
from decimal import Decimal

import pytest

from market.budgets.models import PrivacyBudget
from market.budgets.services import budget_limit_set
from market.jobs.models import Job
from tests.conftest import api_client_for
from workers.algorithms.schema import MIN_TRAINING_ROWS
from workers.privacy.costs import (
    BudgetView,
    calibrate_gnmax,
    compose_costs,
    fedkt_l1_cost_from_parameters,
    fedkt_price,
)
from workers.privacy.settings import DEFAULT_GNMAX_NOISE_RATIO

#: A default L1 job: FedKT with s = 2 that names no query and no noise (so σ and the query are calibrated).
DEFAULT_L1 = {
    "partitions": 2,
    "final_model": {"family": "logistic_regression"},
    "privacy": {"mechanism": "gaussian"},
}


def post_job(user, federation, parameters):
    return api_client_for(user).post(
        f"/api/federations/{federation.slug}/jobs/",
        {"kind": "fedkt", "privacy_level": "L1", "seed": 4, "parameters": parameters},
        format="json",
    )


def visible_noise(user, job_id: int) -> tuple[float, int]:
    """σ and queried rows of a job as ``user`` reads them from the API."""
    response = api_client_for(user).get(f"/api/jobs/{job_id}/")
    assert response.status_code == 200, response.json()
    privacy = response.json()["parameters"]["privacy"]
    return privacy["sigma"], privacy["n_queries"]


def share_calibration(federation, *, most_queries: int, most_votes: int) -> tuple[float, int]:
    """An independent computation of what a default job may be calibrated to: half of a new member's default limit
    (the one budget every member may read), nothing else."""
    view = BudgetView(
        epsilon_limit=float(federation.default_epsilon_limit) * 0.5,
        delta=float(federation.default_delta),
        vote_shift=2,
    )
    solved = calibrate_gnmax(
        [view],
        total_votes=most_votes,
        noise_ratio=DEFAULT_GNMAX_NOISE_RATIO,
        delta=float(federation.default_delta),
        price=fedkt_price(partitions=2),
        min_queries=MIN_TRAINING_ROWS,
        max_queries=most_queries,
    )
    assert solved is not None
    return solved["sigma"], solved["n_queries"]


def test_a_silo_cannot_read_another_silos_remaining_budget_from_a_calibrated_jobs_noise(
    operator, silo_user, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    roomy = post_job(operator, federation, DEFAULT_L1)
    assert roomy.status_code == 201, roomy.json()
    n_public = federation.public_datasets.order_by("-id").first().n_rows
    # The federation's default query is 1 % of the public rows; σ follows the 3 silos × s = 2 votes of a query.
    expected = share_calibration(federation, most_queries=math.ceil(n_public * 0.01), most_votes=6)
    assert visible_noise(silo_user, roomy.json()["id"]) == pytest.approx(expected)

    # Another silo (not the reader's) now has ε 0.8 left beyond what it committed; the reader's own budget is as
    # before. A σ fitted to it would let the reader solve for its limit: the job must be refused instead.
    other = PrivacyBudget.objects.get(organisation_id=fedkt_submissions[1].organisation_id)
    budget_limit_set(
        budget_id=other.id,
        epsilon_limit=str(other.spent + other.reserved + Decimal("0.8")),
        reason="test",
        actor=operator,
    )
    tight = post_job(operator, federation, DEFAULT_L1)
    assert tight.status_code == 409, tight.json()
    assert "privacy budget" in tight.json()["detail"]
    # Every job the reader can see carries the σ and queries of the share, whatever the other silo has left.
    listed = api_client_for(silo_user).get("/api/jobs/", {"federation": federation.slug})
    assert listed.status_code == 200
    rows = listed.json()["results"] if isinstance(listed.json(), dict) else listed.json()
    for row in rows:
        assert visible_noise(silo_user, row["id"]) == pytest.approx(expected)
    assert len(rows) == Job.objects.count() == 1


def test_two_federations_differing_only_in_another_silos_remainder_show_the_same_noise(
    operator, silo_user, fedkt_submissions
):
    """The same job, launched again after the other silo's limit is lowered from the default to just what still
    admits it: identical σ and queries (a guard that the noise never follows a remainder that still fits)."""
    federation = fedkt_submissions[0].federation
    first = post_job(operator, federation, DEFAULT_L1)
    assert first.status_code == 201, first.json()
    first_seen = visible_noise(silo_user, first.json()["id"])
    reserved = fedkt_l1_cost_from_parameters(
        first.json()["parameters"]["privacy"], partitions=2
    ).report.epsilon
    # Room for exactly one more such job at the other silo (and a little): what a second job may cost is read
    # from its limit only if calibration looks at it.
    other = PrivacyBudget.objects.get(organisation_id=fedkt_submissions[1].organisation_id)
    cost = fedkt_l1_cost_from_parameters(first.json()["parameters"]["privacy"], partitions=2)
    two = compose_costs([cost, cost], delta=float(other.delta)).epsilon
    assert two > reserved
    budget_limit_set(
        budget_id=other.id, epsilon_limit=f"{two + 0.001:.6f}", reason="test", actor=operator
    )
    second = post_job(operator, federation, DEFAULT_L1)
    assert second.status_code == 201, second.json()
    assert visible_noise(silo_user, second.json()["id"]) == first_seen


def test_a_confident_job_whose_checks_fit_nothing_is_refused_naming_a_check_noise_that_fits(
    operator, fedkt_submissions
):
    federation = fedkt_submissions[0].federation
    # Budgets far above the default share (a main that fell back to the ratio's σ charged ε 31 here).
    cheap = {**DEFAULT_L1, "query": 10, "privacy": {"mechanism": "gaussian", "sigma": 1e4}}
    assert post_job(operator, federation, cheap).status_code == 201
    for budget in PrivacyBudget.objects.all():
        budget_limit_set(budget_id=budget.id, epsilon_limit="100", reason="roomy", actor=operator)
    reserved_before = {budget.id: budget.reserved for budget in PrivacyBudget.objects.all()}
    jobs = Job.objects.count()
    refused = post_job(
        operator, federation, {**DEFAULT_L1, "privacy": {"mechanism": "confident_gnmax"}}
    )
    assert refused.status_code == 400, refused.json()
    detail = refused.json()["detail"]
    assert '"sigma_threshold" of at least' in detail and "party-level" in detail
    assert Job.objects.count() == jobs
    assert {b.id: b.reserved for b in PrivacyBudget.objects.all()} == reserved_before

    named = float(detail.split('"sigma_threshold" of at least ')[1].split(" votes")[0])
    accepted = post_job(
        operator,
        federation,
        {**DEFAULT_L1, "privacy": {"mechanism": "confident_gnmax", "sigma_threshold": named}},
    )
    assert accepted.status_code == 201, accepted.json()
    privacy = accepted.json()["parameters"]["privacy"]
    assert privacy["sigma"] <= 5 * 6  # at most 5 × the votes a query holds: not pure noise
    spent = fedkt_l1_cost_from_parameters(privacy, partitions=2).report.epsilon
    assert spent <= float(federation.default_epsilon_limit) * 0.5 * (1 + 1e-9)


def test_a_default_limit_that_only_pure_noise_would_fit_is_refused(operator, fedkt_submissions):
    federation = fedkt_submissions[0].federation
    federation.default_epsilon_limit = "0.01"
    federation.save(update_fields=["default_epsilon_limit"])
    refused = post_job(operator, federation, DEFAULT_L1)
    assert refused.status_code == 400, refused.json()
    assert "pure noise" in refused.json()["detail"]
    assert "ε 0.005, party-level" in refused.json()["detail"]
    assert not Job.objects.exists()
