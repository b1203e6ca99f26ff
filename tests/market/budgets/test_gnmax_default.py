"""Issue 25, as issue 38 item 1 left it: a default L1 job (GNMax, calibrated) is calibrated to a new member's share
of the federation's default limit only, never to what the chosen silos have left (that would publish their
remainders through σ and the query count); where a silo cannot afford it, the reservation refuses it."""

import pytest
from django.db import transaction

from market.budgets.models import PrivacyBudget
from market.budgets.services import BudgetExceeded, budget_limit_set
from market.jobs.parameters import job_parameters_validate
from market.jobs.spending import job_budget_reserve
from tests.fixtures.budgets import job_row

N_PUBLIC = 2000


def _default_l1(federation, submissions=None):
    return job_parameters_validate(
        kind="fedkt",
        privacy_level="L1",
        parameters={},
        federation=federation,
        n_public=N_PUBLIC,
        n_submissions=len(submissions) if submissions else None,
    )


def test_a_default_job_is_not_calibrated_down_to_what_the_silos_have_left(
    federation_with_data, submissions, make_job, operator
):
    federation_with_data.default_parameters = {}
    federation_with_data.save()
    fresh = _default_l1(federation_with_data, submissions)
    assert fresh["privacy"]["mechanism"] == "gaussian"
    job_budget_reserve(job=make_job(), actor=operator)  # an earlier Laplace job: ε ≈ 5.3 each
    for (
        budget
    ) in PrivacyBudget.objects.all():  # of a limit of 7: less than a fresh default job's 5 is left
        budget_limit_set(budget_id=budget.id, epsilon_limit="7", reason="test", actor=operator)
    tired = _default_l1(federation_with_data, submissions)
    assert tired == fresh  # the same σ and queries, whatever the silos have left
    job = job_row(federation_with_data, submissions, operator, privacy=tired["privacy"])
    with pytest.raises(BudgetExceeded), transaction.atomic():
        job_budget_reserve(job=job, actor=operator)


def test_a_default_job_for_silos_with_nothing_left_is_refused_by_the_reservation(
    federation_with_data, submissions, make_job, operator
):
    job_budget_reserve(job=make_job(), actor=operator)
    for budget in PrivacyBudget.objects.all():
        budget_limit_set(
            budget_id=budget.id, epsilon_limit=str(budget.reserved), reason="full", actor=operator
        )
    parameters = _default_l1(federation_with_data, submissions)
    job = job_row(federation_with_data, submissions, operator, privacy=parameters["privacy"])
    with pytest.raises(BudgetExceeded), transaction.atomic():
        job_budget_reserve(job=job, actor=operator)
