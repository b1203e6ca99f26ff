"""A job's and an augmentation's reservation at the edge of the silos' budgets: exactly what they need left is
admitted, a millionth less is refused by the service with the budget's sentence (not by the database's constraint),
and nothing is reserved. (The same edge for L2 uploads: tests/market/submissions/test_budget_boundary.py.)"""

from decimal import Decimal

import pytest

from market.augmentations.services import augmentation_create, augmentation_start, seeds_upload
from market.augmentations.spending import augmentation_budget_release
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.services import BudgetExceeded, budget_limit_set, budgets_ensure
from market.jobs.spending import job_budget_release, job_budget_reserve

MILLIONTH = Decimal("0.000001")


def budgets(federation) -> list[PrivacyBudget]:
    return list(PrivacyBudget.objects.filter(federation=federation).order_by("id"))


def limits_set(federation, limits: dict, operator) -> None:
    for budget in budgets(federation):
        budget_limit_set(
            budget_id=budget.id, epsilon_limit=limits[budget.id], reason="edge", actor=operator
        )


def test_a_job_fits_exactly_what_is_left_and_not_a_millionth_less(
    make_job, operator, federation_with_data
):
    budgets_ensure(federation=federation_with_data)
    probe = make_job()
    job_budget_reserve(job=probe, actor=operator)
    needed = {budget.id: budget.reserved for budget in budgets(federation_with_data)}
    job_budget_release(job=probe)
    assert all(value > 0 for value in needed.values()) and len(needed) == 2

    limits_set(
        federation_with_data, {id: value - MILLIONTH for id, value in needed.items()}, operator
    )
    job = make_job()
    with pytest.raises(BudgetExceeded) as refusal:
        job_budget_reserve(job=job, actor=operator)
    first = min(needed)
    assert str(refusal.value).startswith(
        f"Northwind Hospital's privacy budget in 'adult-income' has ε = {needed[first] - MILLIONTH} "
        f"left, but a {job.get_kind_display()} job at L1 needs ε = {needed[first]} more (party-level) "
        "(1 other silo(s) too)."
    )
    assert not BudgetEntry.objects.filter(spender_kind="job", spender_id=job.id).exists()
    assert [budget.reserved for budget in budgets(federation_with_data)] == [0, 0]

    limits_set(federation_with_data, needed, operator)
    job_budget_reserve(job=job, actor=operator)
    assert [budget.remaining for budget in budgets(federation_with_data)] == [0, 0]
    assert (
        BudgetEntry.objects.filter(spender_kind="job", spender_id=job.id, kind="reserve").count()
        == 2
    )


def augmentation_with_seeds(federation, operator, silos, name: str):
    augmentation = augmentation_create(
        federation=federation,
        actor=operator,
        name=name,
        n_features=2,
        epochs=1,
        batch_size=2,
        noise_multiplier=1.0,
    )
    for user in silos:
        seeds_upload(
            augmentation=augmentation,
            user=user,
            target_labels=[1],
            labels=[1, 0],
            features=[[0.1, 0.9], [0.5, 0.5]],
        )
    return augmentation


def test_an_augmentation_fits_exactly_what_is_left_and_not_a_millionth_less(
    operator, members, federation_with_data
):
    budgets_ensure(federation=federation_with_data)
    probe = augmentation_with_seeds(federation_with_data, operator, members, "probe")
    augmentation_start(augmentation=probe, actor=operator)
    needed = {budget.id: budget.reserved for budget in budgets(federation_with_data)}
    augmentation_budget_release(augmentation=probe)
    assert all(value > 0 for value in needed.values()) and len(needed) == 2

    limits_set(
        federation_with_data, {id: value - MILLIONTH for id, value in needed.items()}, operator
    )
    augmentation = augmentation_with_seeds(federation_with_data, operator, members, "edge")
    with pytest.raises(BudgetExceeded) as refusal:
        augmentation_start(augmentation=augmentation, actor=operator)
    first = min(needed)
    assert str(refusal.value).startswith(
        f"Northwind Hospital's privacy budget in 'adult-income' has ε = {needed[first] - MILLIONTH} "
        f"left, but the DP generator of augmentation #{augmentation.id} needs ε = {needed[first]} more "
        "(example-level) (1 other silo(s) too)."
    )
    augmentation.refresh_from_db()
    assert augmentation.status == "collecting"
    assert not BudgetEntry.objects.filter(
        spender_kind="augmentation", spender_id=augmentation.id
    ).exists()
    assert [budget.reserved for budget in budgets(federation_with_data)] == [0, 0]

    limits_set(federation_with_data, needed, operator)
    augmentation_start(augmentation=augmentation, actor=operator)
    assert [budget.remaining for budget in budgets(federation_with_data)] == [0, 0]
    assert (
        BudgetEntry.objects.filter(
            spender_kind="augmentation", spender_id=augmentation.id, kind="reserve"
        ).count()
        == 2
    )
