"""Budget fixtures: two member silos with one L1 submission each, and L1 FedKT job rows made directly.

The jobs helper's services create jobs for real; here a Job row is saved as job_create would, so the budget
services are tested on their own.
"""

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
