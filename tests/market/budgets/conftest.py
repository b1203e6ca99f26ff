"""Budget fixtures: two member silos with one L1 submission each, and L1 FedKT job rows made directly.

The jobs helper's services create jobs for real; here a Job row is saved as job_create would, so the budget
services are tested on their own.
"""

from decimal import Decimal

import pytest

from market.federations.selectors import public_dataset_current

LAPLACE = {"mechanism": "laplace", "gamma": 0.04, "sigma": None, "delta": 1e-5, "n_queries": 100}


@pytest.fixture
def members(federation_with_data, silo_user, other_silo_user):
    """Both silos are members (the first joined through federation_with_data)."""
    from market.federations.membership import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    return [silo_user, other_silo_user]


def submission_row(federation, user, *, tag: str = "a", privacy_level: str = "L1"):
    from market.submissions.models import Submission

    return Submission.objects.create(
        federation=federation,
        organisation=user.organisation,
        submitted_by=user,
        public_dataset=public_dataset_current(federation=federation),
        model_family="xgboost",
        n_local_examples=1000,
        local_validation_score=0.8,
        privacy_level=privacy_level,
        content_sha256=f"{user.organisation_id}-{tag}".ljust(64, "0"),
    )


@pytest.fixture
def submissions(federation_with_data, members):
    return [submission_row(federation_with_data, user) for user in members]


def job_row(
    federation,
    submissions,
    requested_by,
    *,
    privacy=None,
    partitions: int = 2,
    privacy_level: str = "L1",
):
    from market.jobs.models import Job

    job = Job.objects.create(
        federation=federation,
        kind="fedkt",
        privacy_level=privacy_level,
        parameters={"privacy": privacy or LAPLACE, "partitions": partitions},
        seed=0,
        public_dataset=public_dataset_current(federation=federation),
        evaluation_split=federation.evaluation_splits.first(),
        requested_by=requested_by,
    )
    job.submissions.set(submissions)
    return job


@pytest.fixture
def make_job(federation_with_data, submissions, operator):
    def make(**options):
        return job_row(
            federation_with_data, options.pop("submissions", submissions), operator, **options
        )

    return make


def job_charged(job, operator, *, queries: int):
    """Reserve and charge an L1 job through the real services, as if it answered ``queries`` Laplace queries."""
    from market.jobs.spending import job_budget_charge, job_budget_reserve
    from workers.privacy.costs import fedkt_l1_cost
    from workers.privacy.reports import JobPrivacyReport

    job_budget_reserve(job=job, actor=operator)
    cost = fedkt_l1_cost(**{**LAPLACE, "n_queries": queries}, partitions=2)
    job_budget_charge(
        job=job, privacy_report=JobPrivacyReport(level="L1", data_independent=cost.report)
    )


@pytest.fixture
def composed_charges(federation_with_data, make_job, operator):
    """Two charges on each silo's budget, composed by RDP: 100 queries take the spend to exactly 80 % of the limit,
    then 10 queries take it to 84.6 % (passing no new threshold), although the spend before, taken as the spend
    after minus the second charge's ε, would be 64.5 %. Returns the two jobs."""
    from market.budgets.ledger import epsilon_decimal
    from market.budgets.models import PrivacyBudget
    from market.budgets.services import budget_limit_set, budgets_ensure
    from workers.privacy.costs import fedkt_l1_cost

    first_epsilon = epsilon_decimal(fedkt_l1_cost(**LAPLACE, partitions=2).report.epsilon)
    budgets_ensure(federation=federation_with_data)
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        budget_limit_set(
            budget_id=budget.id,
            epsilon_limit=first_epsilon / Decimal("0.8"),
            reason="test",
            actor=operator,
        )
    jobs = [make_job(), make_job(privacy={**LAPLACE, "n_queries": 10})]
    job_charged(jobs[0], operator, queries=100)
    job_charged(jobs[1], operator, queries=10)
    return jobs
