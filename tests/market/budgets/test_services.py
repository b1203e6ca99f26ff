from dataclasses import replace
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.services import (
    BudgetExceeded,
    budget_limit_set,
    budget_refusal_record,
    budgets_ensure,
    epsilon_decimal,
)
from market.errors import Conflict, PermissionDenied
from market.jobs.privacy_costs import budget_calibrate, budget_price_job
from market.jobs.spending import job_budget_charge, job_budget_release, job_budget_reserve
from tests.fixtures.budgets import LAPLACE, ONE_JOB, budgets_of, limit_all
from workers.privacy.costs import compose_costs, fedkt_l1_cost
from workers.privacy.reports import JobPrivacyReport


def test_budgets_are_created_lazily_for_members_with_the_federations_defaults(
    federation_with_data, members
):
    budgets_ensure(federation=federation_with_data)
    budgets_ensure(federation=federation_with_data)
    budgets = budgets_of(federation_with_data)
    assert [budget.organisation.name for budget in budgets] == [
        "Contoso Bank",
        "Northwind Hospital",
    ]
    assert all(
        (b.epsilon_limit, b.delta, b.spent, b.reserved) == (Decimal(10), Decimal("0.00001"), 0, 0)
        for b in budgets
    )


def test_reserving_an_l1_job_reserves_its_bound_for_every_silo_and_sets_the_job_bound(
    make_job, operator, federation_with_data
):
    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    expected = epsilon_decimal(ONE_JOB.report.epsilon)
    for budget in budgets_of(federation_with_data):
        assert (budget.spent, budget.reserved, budget.composition_rule) == (0, expected, "rdp")
        [entry] = budget.entries.all()
        assert (
            entry.kind,
            entry.epsilon,
            entry.unit,
            entry.spender_id_of("job"),
            entry.actor_id,
        ) == (
            "reserve",
            expected,
            "party-level",
            job.id,
            operator.id,
        )
        assert (entry.spent_after, entry.reserved_after, entry.delta) == (
            0,
            expected,
            Decimal("0.00001"),
        )
    job.refresh_from_db()
    assert (
        job.privacy_bound["epsilon"] == ONE_JOB.report.epsilon
        and job.privacy_bound["unit"] == "party-level"
    )
    job_budget_reserve(job=job, actor=operator)  # again: nothing changes
    assert BudgetEntry.objects.count() == 2


def test_two_reservations_compose_better_than_additively(make_job, operator, federation_with_data):
    job_budget_reserve(job=make_job(), actor=operator)
    job_budget_reserve(job=make_job(), actor=operator)
    budget = budgets_of(federation_with_data)[0]
    assert budget.reserved == epsilon_decimal(compose_costs([ONE_JOB, ONE_JOB], delta=1e-5).epsilon)
    assert budget.reserved < 2 * epsilon_decimal(ONE_JOB.report.epsilon)


def test_a_job_that_would_overspend_is_refused_and_nothing_is_written(
    make_job, operator, federation_with_data
):
    limit_all(federation_with_data, "5", operator)  # one job needs ε ≈ 5.33
    entries_before = BudgetEntry.objects.count()
    job = make_job()
    with pytest.raises(BudgetExceeded) as refused, transaction.atomic():
        job_budget_reserve(job=job, actor=operator)
    budget_refusal_record(error=refused.value, actor=operator, target=job)
    assert (
        f"Northwind Hospital's privacy budget in 'adult-income' has ε = 5.000000 left, but a FedKT job at L1 needs ε = "
        f"{epsilon_decimal(ONE_JOB.report.epsilon)} more (party-level)" in str(refused.value)
    )
    assert "(1 other silo(s) too)" in str(refused.value)
    silos = refused.value.details["silos"]
    assert [silo["organisation"] for silo in silos] == [
        "Northwind Hospital",
        "Contoso Bank",
    ]  # budget id order
    assert (
        silos[0]["needed"] == str(epsilon_decimal(ONE_JOB.report.epsilon))
        and silos[0]["remaining"] == "5.000000"
    )
    assert BudgetEntry.objects.count() == entries_before
    assert all((b.spent, b.reserved) == (0, 0) for b in budgets_of(federation_with_data))
    job.refresh_from_db()
    assert job.privacy_bound is None
    event = AuditEvent.objects.filter(action="budget.refused").get()
    assert event.outcome == "refused" and event.details["silos"] == silos


def test_release_before_noise_frees_the_reservation(make_job, operator, federation_with_data):
    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    job_budget_release(job=job)
    job_budget_release(job=job)  # idempotent
    for budget in budgets_of(federation_with_data):
        assert (budget.spent, budget.reserved) == (0, 0)
        assert [entry.kind for entry in budget.entries.order_by("id")] == ["reserve", "release"]
        assert budget.entries.get(kind="release").epsilon == epsilon_decimal(ONE_JOB.report.epsilon)


def test_charge_after_noise_moves_the_reservation_into_the_spend(
    make_job, operator, federation_with_data
):
    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    dependent = replace(ONE_JOB.report, epsilon=1.25, data_dependent=True)
    report = JobPrivacyReport(level="L1", data_independent=ONE_JOB.report, data_dependent=dependent)
    job_budget_charge(job=job, privacy_report=report)
    job_budget_charge(job=job, privacy_report=report)  # idempotent
    job_budget_release(job=job)  # nothing left to release
    for budget in budgets_of(federation_with_data):
        assert (budget.spent, budget.reserved) == (epsilon_decimal(ONE_JOB.report.epsilon), 0)
        assert [entry.kind for entry in budget.entries.order_by("id")] == ["reserve", "charge"]
        charge = budget.entries.get(kind="charge")
        assert (
            charge.parameters["data_dependent"]["epsilon"] == 1.25
            and charge.cost["rdp"] is not None
        )


def test_a_job_that_queried_fewer_rows_is_charged_what_it_queried(
    make_job, operator, federation_with_data
):
    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    fewer = fedkt_l1_cost(
        mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=40, partitions=2
    )
    job_budget_charge(
        job=job,
        privacy_report=JobPrivacyReport(level="L1", data_independent=fewer.report),
    )
    assert all(
        (b.spent, b.reserved) == (epsilon_decimal(fewer.report.epsilon), 0)
        for b in budgets_of(federation_with_data)
    )


def test_l0_and_l2_jobs_touch_no_budget(make_job, operator):
    for level in ("L0", "L2"):
        job = make_job(privacy_level=level)
        job_budget_reserve(job=job, actor=operator)
        job_budget_charge(job=job, privacy_report=JobPrivacyReport(level=level))
    assert BudgetEntry.objects.count() == 0


def test_lowering_a_limit_below_the_spend_is_refused_audited_and_changes_nothing(
    make_job, operator, federation_with_data
):
    job_budget_reserve(job=make_job(), actor=operator)
    budget = budgets_of(federation_with_data)[0]
    with pytest.raises(
        Conflict,
        match=r"already spent and reserved ε = 5\.3\d+ in 'adult-income'; the limit cannot",
    ):
        budget_limit_set(budget_id=budget.id, epsilon_limit="5", reason="tighten", actor=operator)
    budget.refresh_from_db()
    assert budget.epsilon_limit == 10 and budget.entries.filter(kind="adjust").count() == 0
    event = AuditEvent.objects.get(action="budget.limit_changed")
    assert (event.outcome, event.details["requested_limit"], event.object_id) == (
        "refused",
        "5.000000",
        str(budget.id),
    )


def test_raising_a_limit_writes_an_adjust_entry_and_an_audit_event(
    federation_with_data, members, operator
):
    budgets_ensure(federation=federation_with_data)
    budget = budgets_of(federation_with_data)[1]
    budget_limit_set(budget_id=budget.id, epsilon_limit="12.5", reason="more rows", actor=operator)
    budget.refresh_from_db()
    [entry] = budget.entries.all()
    assert (
        budget.epsilon_limit,
        entry.kind,
        entry.epsilon,
        entry.epsilon_limit_after,
        entry.reason,
    ) == (Decimal("12.5"), "adjust", Decimal("2.5"), Decimal("12.5"), "more rows")
    event = AuditEvent.objects.get(action="budget.limit_changed")
    assert (
        event.outcome,
        event.actor_id,
        event.details["previous_limit"],
        event.details["requested_limit"],
    ) == ("success", operator.id, "10.000000", "12.500000")


def test_only_operators_change_limits(federation_with_data, members, silo_user):
    budgets_ensure(federation=federation_with_data)
    budget = budgets_of(federation_with_data)[1]
    with pytest.raises(PermissionDenied):
        budget_limit_set(budget_id=budget.id, epsilon_limit="99", reason="", actor=silo_user)
    budget.refresh_from_db()
    assert budget.epsilon_limit == 10


def test_the_database_refuses_an_overspent_budget_row(federation_with_data, members):
    budgets_ensure(federation=federation_with_data)
    with pytest.raises(IntegrityError), transaction.atomic():
        PrivacyBudget.objects.filter(federation=federation_with_data).update(spent=Decimal("10.5"))
    with pytest.raises(IntegrityError), transaction.atomic():
        PrivacyBudget.objects.filter(federation=federation_with_data).update(reserved=Decimal("-1"))


def test_the_database_refuses_to_change_or_delete_a_ledger_entry(make_job, operator):
    assert connection.vendor == "postgresql"
    job_budget_reserve(job=make_job(), actor=operator)
    with pytest.raises(Exception, match="append-only"), transaction.atomic():
        BudgetEntry.objects.update(epsilon=0)
    with pytest.raises(Exception, match="append-only"), transaction.atomic():
        BudgetEntry.objects.all().delete()
    assert BudgetEntry.objects.filter(epsilon__gt=0).count() == 2


def test_pricing_quotes_each_silo_without_reserving(
    federation_with_data, members, operator, make_job
):
    job_budget_reserve(job=make_job(), actor=operator)
    quote = budget_price_job(
        federation=federation_with_data,
        organisations=[user.organisation for user in members],
        kind="fedkt",
        parameters={"partitions": 2, "privacy": LAPLACE},
    )
    both = epsilon_decimal(compose_costs([ONE_JOB, ONE_JOB], delta=1e-5).epsilon)
    one = epsilon_decimal(ONE_JOB.report.epsilon)
    assert quote["cost"]["epsilon"] == ONE_JOB.report.epsilon and quote["fits"] is True
    northwind = [silo for silo in quote["silos"] if silo["organisation"] == "Northwind Hospital"][0]
    assert (northwind["reserved"], northwind["needed"], northwind["remaining_after"]) == (
        str(one),
        str(both - one),
        str(Decimal(10) - both),
    )
    assert BudgetEntry.objects.filter(kind="reserve").count() == 2


def test_calibration_finds_the_largest_gamma_and_most_queries_that_fit(
    federation_with_data, members
):
    organisations = [user.organisation for user in members]
    noise = budget_calibrate(
        federation=federation_with_data,
        organisations=organisations,
        kind="fedkt",
        parameters={"partitions": 2, "privacy": LAPLACE},
        solve_for="noise",
    )
    assert noise["parameter"] == "gamma" and noise["price"]["fits"] is True
    assert 0.04 < noise["value"] < 0.1
    queries = budget_calibrate(
        federation=federation_with_data,
        organisations=organisations,
        kind="fedkt",
        parameters={"partitions": 2, "privacy": LAPLACE},
        solve_for="queries",
    )
    assert queries["parameter"] == "n_queries" and queries["price"]["fits"] is True
    over = budget_price_job(
        federation=federation_with_data,
        organisations=organisations,
        kind="fedkt",
        parameters={"partitions": 2, "privacy": {**LAPLACE, "n_queries": queries["value"] + 1}},
    )
    assert over["fits"] is False
