"""Budgets under concurrency and faults, on the real PostgreSQL: threads, each with its own connection."""

from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market.audit.models import AuditEvent
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.services import (
    BudgetExceeded,
    budget_amounts,
    budget_limit_set,
    budget_refusal_record,
    budgets_ensure,
    epsilon_decimal,
    ledger_state,
)
from market.errors import Conflict
from market.jobs.spending import job_budget_charge, job_budget_release, job_budget_reserve
from market.submissions.spending import submission_budget_charge
from tests.conftest import run_at_once
from tests.fixtures.budgets import LAPLACE, submission_row
from workers.privacy.costs import compose_costs, fedkt_l1_cost
from workers.privacy.reports import JobPrivacyReport

ONE_JOB = fedkt_l1_cost(
    mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=100, partitions=2
)


def admits_exactly(n_jobs: int) -> Decimal:
    """A limit that n jobs fit and n + 1 do not (through the RDP accountant, not n times one job)."""
    limit = epsilon_decimal(compose_costs([ONE_JOB] * n_jobs, delta=1e-5).epsilon)
    assert epsilon_decimal(compose_costs([ONE_JOB] * (n_jobs + 1), delta=1e-5).epsilon) > limit
    return limit


def assert_budget_matches_its_ledger(budget: PrivacyBudget) -> None:
    budget.refresh_from_db()
    state = ledger_state(budget)
    amounts = budget_amounts(
        budget=budget,
        charged=state.charged,
        reserved=[cost for cost, _ in state.open_reservations.values()],
    )
    assert (budget.spent, budget.reserved) == (amounts.spent, amounts.reserved)
    last = budget.entries.order_by("-id").first()
    if last is not None:
        assert (last.spent_after, last.reserved_after, last.epsilon_limit_after) == (
            budget.spent,
            budget.reserved,
            budget.epsilon_limit,
        )
    assert Decimal(0) <= budget.spent and Decimal(0) <= budget.reserved
    assert budget.spent + budget.reserved <= budget.epsilon_limit


def reserve_or_refuse(job, actor) -> str:
    try:
        with transaction.atomic():
            job_budget_reserve(job=job, actor=actor)
    except BudgetExceeded as error:
        budget_refusal_record(error=error, actor=actor, target=job)
        return "refused"
    return "admitted"


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_jobs_against_budgets_that_admit_five(
    make_job, operator, federation_with_data
):
    limit = admits_exactly(5)
    budgets_ensure(federation=federation_with_data)
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        budget_limit_set(
            budget_id=budget.id, epsilon_limit=limit, reason="five jobs", actor=operator
        )
    jobs = [make_job() for _ in range(50)]

    outcomes = run_at_once(lambda job: reserve_or_refuse(job, operator), jobs)

    assert outcomes.count("admitted") == 5 and outcomes.count("refused") == 45
    admitted = {job.id for job, outcome in zip(jobs, outcomes) if outcome == "admitted"}
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        assert (
            set(budget.entries.filter(kind="reserve").values_list("spender_id", flat=True))
            == admitted
        )
        assert budget.entries.filter(kind="reserve").count() == 5
        assert (budget.spent, budget.reserved) == (0, limit)
        assert sum(
            entry.epsilon for entry in budget.entries.filter(kind="reserve")
        ) == 5 * epsilon_decimal(
            ONE_JOB.report.epsilon
        )  # the lines' own amounts; the reservation is their RDP composition
        assert_budget_matches_its_ledger(budget)
    assert AuditEvent.objects.filter(action="budget.refused").count() == 45
    assert AuditEvent.objects.filter(action="budget.limit_changed", outcome="success").count() == 2
    for job in jobs:
        job.refresh_from_db()
        assert (job.privacy_bound is not None) == (job.id in admitted)


@pytest.mark.django_db(transaction=True)
def test_settling_concurrently_keeps_the_ledger_whole(make_job, operator, federation_with_data):
    small = fedkt_l1_cost(
        mechanism="laplace", gamma=0.04, sigma=None, delta=1e-5, n_queries=20, partitions=2
    )
    jobs = [make_job(privacy={**LAPLACE, "n_queries": 20}) for _ in range(6)]
    for job in jobs:
        job_budget_reserve(job=job, actor=operator)
    report = JobPrivacyReport(level="L1", data_independent=small.report)

    def settle(job):
        # Half fail before any noise (release), half after (charge); each twice, as a retried task would.
        for _ in range(2):
            if job.id % 2:
                job_budget_release(job=job)
            else:
                job_budget_charge(job=job, privacy_report=report)

    run_at_once(settle, jobs)
    charged = sum(1 for job in jobs if job.id % 2 == 0)
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        kinds = list(budget.entries.values_list("kind", flat=True))
        assert (kinds.count("reserve"), kinds.count("charge"), kinds.count("release")) == (
            6,
            charged,
            6 - charged,
        )
        assert budget.reserved == 0
        assert budget.spent == epsilon_decimal(compose_costs([small] * charged, delta=1e-5).epsilon)
        assert_budget_matches_its_ledger(budget)


def test_a_job_transaction_that_fails_after_reserving_leaves_nothing(
    make_job, operator, federation_with_data
):
    job = make_job()
    with pytest.raises(RuntimeError), transaction.atomic():
        job_budget_reserve(job=job, actor=operator)
        raise RuntimeError("the broker is down")
    assert BudgetEntry.objects.count() == 0
    assert all(
        (b.spent, b.reserved) == (0, 0)
        for b in PrivacyBudget.objects.filter(federation=federation_with_data)
    )


@pytest.fixture
def job_pool(make_job):
    return [
        make_job(privacy={**LAPLACE, "n_queries": n_queries})
        for n_queries in (5, 20, 50, 100, 150, 300)
    ]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.integers(0, 5)),
        st.tuples(st.just("charge"), st.integers(0, 5), st.floats(0.0, 1.0)),
        st.tuples(st.just("release"), st.integers(0, 5)),
        st.tuples(st.just("adjust"), st.decimals(0, 20, places=2)),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=operations)
def test_no_sequence_of_operations_overspends(job_pool, operator, federation_with_data, steps):
    with transaction.atomic():
        budgets_ensure(federation=federation_with_data)
        budgets = list(PrivacyBudget.objects.filter(federation=federation_with_data))
        for step in steps:
            apply(step, job_pool, operator, budgets[0])
            for budget in budgets:
                assert_budget_matches_its_ledger(budget)
        transaction.set_rollback(True)  # the next example starts from fresh budgets


def apply(step, job_pool, operator, budget) -> None:
    kind, *arguments = step
    if kind == "reserve":
        try:
            with transaction.atomic():
                job_budget_reserve(job=job_pool[arguments[0]], actor=operator)
        except BudgetExceeded:
            pass
    elif kind == "charge":  # the job answered a fraction of the queries it reserved
        job = job_pool[arguments[0]]
        privacy = job.parameters["privacy"]
        actual = fedkt_l1_cost(
            mechanism="laplace",
            gamma=privacy["gamma"],
            sigma=None,
            delta=privacy["delta"],
            n_queries=int(privacy["n_queries"] * arguments[1]),
            partitions=2,
        )
        try:
            with transaction.atomic():
                job_budget_charge(
                    job=job,
                    privacy_report=JobPrivacyReport(level="L1", data_independent=actual.report),
                )
        except (
            BudgetExceeded
        ):  # only a job charged without (or after releasing) its reservation can get here
            assert not any(
                job.id in ledger_state(b).open_reservations for b in PrivacyBudget.objects.all()
            )
    elif kind == "release":
        job_budget_release(job=job_pool[arguments[0]])
    else:
        budget.refresh_from_db()
        committed = budget.spent + budget.reserved
        try:
            budget_limit_set(
                budget_id=budget.id, epsilon_limit=arguments[0], reason="property", actor=operator
            )
            assert arguments[0] >= committed
        except Conflict:
            assert arguments[0] < committed


def l2_submission(federation, user, tag: str, declared_epsilon: float):
    from market.submissions.models import Submission
    from workers.privacy.declarations import party_side_bound

    L2 = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}
    submission = submission_row(federation, user, tag=tag, privacy_level="L2")
    Submission.objects.filter(id=submission.id).update(
        privacy_parameters=L2,
        declared_epsilon=declared_epsilon,
        privacy_report=party_side_bound(L2, n_local_examples=0)[0].as_dict(),
    )
    submission.refresh_from_db()
    return submission


@pytest.mark.django_db(transaction=True)
def test_concurrent_l2_charges_admit_exactly_what_the_limit_allows(
    federation_with_data, silo_user, operator
):
    budgets_ensure(federation=federation_with_data)
    budget = PrivacyBudget.objects.get(organisation=silo_user.organisation)
    budget_limit_set(
        budget_id=budget.id, epsilon_limit="7.5", reason="three uploads", actor=operator
    )
    submissions = [
        l2_submission(federation_with_data, silo_user, f"l2-{index}-x", 2.5) for index in range(12)
    ]

    def charge(submission) -> str:
        try:
            with transaction.atomic():
                submission_budget_charge(submission=submission, actor=silo_user)
        except BudgetExceeded:
            return "refused"
        return "charged"

    outcomes = run_at_once(charge, submissions)
    assert outcomes.count("charged") == 3 and outcomes.count("refused") == 9
    budget.refresh_from_db()
    assert (budget.spent, budget.reserved, budget.composition_rule) == (
        Decimal("7.5"),
        0,
        "additive",
    )
    assert budget.entries.filter(kind="charge").count() == 3
    assert_budget_matches_its_ledger(budget)


@pytest.mark.django_db(transaction=True)
def test_limit_changes_racing_reservations_never_leave_a_budget_overspent(
    make_job, operator, federation_with_data
):
    budgets_ensure(federation=federation_with_data)
    budget_ids = list(
        PrivacyBudget.objects.filter(federation=federation_with_data).values_list("id", flat=True)
    )
    jobs = [make_job(privacy={**LAPLACE, "n_queries": 20}) for _ in range(10)]
    limits = ["3", "12", "2.5", "9", "4", "15", "1", "6", "8", "5"]

    def act(argument):
        kind, value = argument
        if kind == "reserve":
            return reserve_or_refuse(value, operator)
        try:
            budget_limit_set(
                budget_id=budget_ids[len(value) % 2],
                epsilon_limit=value,
                reason="race",
                actor=operator,
            )
        except Conflict:
            return "limit refused"
        return "limit set"

    outcomes = run_at_once(
        act, [("reserve", job) for job in jobs] + [("limit", limit) for limit in limits]
    )
    assert len(outcomes) == 20
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        assert_budget_matches_its_ledger(budget)
    changes = AuditEvent.objects.filter(action="budget.limit_changed").count()
    assert changes == outcomes.count("limit set") + outcomes.count("limit refused") == 10


@pytest.mark.django_db(transaction=True)
def test_augmentations_starting_while_jobs_are_charged_lock_the_same_silos_without_a_deadlock(
    make_job, operator, members, federation_with_data
):
    """Each pair: an augmentation's start (the web: reserve its DP generator's ε for both silos) and a job's
    finalisation (the worker: lock the job, charge both silos), at once, against the same two budgets."""
    from market.augmentations.models import AugmentationStatus
    from market.augmentations.services import augmentation_create, augmentation_start, seeds_upload
    from market.jobs.models import Job

    rounds = 3
    budgets_ensure(federation=federation_with_data)
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        budget_limit_set(budget_id=budget.id, epsilon_limit=1000, reason="room", actor=operator)
    jobs = [make_job() for _ in range(rounds)]
    for job in jobs:
        job_budget_reserve(job=job, actor=operator)
    augmentations = []
    for index in range(rounds):
        augmentation = augmentation_create(
            federation=federation_with_data,
            actor=operator,
            name=f"FAug {index}",
            n_features=2,
            epochs=1,
            batch_size=2,
            noise_multiplier=1.0,
        )
        for user in members:
            seeds_upload(
                augmentation=augmentation,
                user=user,
                target_labels=[1],
                labels=[1, 0],
                features=[[0.1, 0.9], [0.5, 0.5]],
            )
        augmentations.append(augmentation)
    report = JobPrivacyReport(level="L1", data_independent=ONE_JOB.report)

    def start_or_finalise(task):
        kind, target = task
        if kind == "augmentation":
            augmentation_start(augmentation=target, actor=operator)
        else:
            with transaction.atomic():
                locked = Job.objects.select_for_update().get(id=target.id)
                job_budget_charge(job=locked, privacy_report=report)
        return kind

    tasks = [("augmentation", item) for item in augmentations] + [("job", job) for job in jobs]
    assert (
        sorted(run_at_once(start_or_finalise, tasks))
        == ["augmentation"] * rounds + ["job"] * rounds
    )

    for augmentation in augmentations:
        augmentation.refresh_from_db()
        assert augmentation.status == AugmentationStatus.QUEUED
    for budget in PrivacyBudget.objects.filter(federation=federation_with_data):
        kinds = list(budget.entries.values_list("kind", flat=True))
        assert (kinds.count("reserve"), kinds.count("charge")) == (2 * rounds, rounds)
        assert budget.spent == epsilon_decimal(
            compose_costs([ONE_JOB] * rounds, delta=1e-5).epsilon
        )
        assert_budget_matches_its_ledger(budget)


def lock_both_budgets(first, second, barrier, attempts: list):
    """Lock ``first``, wait until the other thread locked its first, then lock ``second``: crossed, a deadlock."""
    attempts.append(first.id)
    with transaction.atomic():
        PrivacyBudget.objects.select_for_update().get(id=first.id)
        if len(attempts) <= 2:  # only the first attempts cross; a retry finds the other committed
            barrier.wait(timeout=60)
        PrivacyBudget.objects.select_for_update().get(id=second.id)
    return "locked both"


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_between_two_budget_transactions_is_run_again_not_answered_500(
    members, federation_with_data
):
    from threading import Barrier

    from market.errors import TryAgain, domain_error_from
    from market.transient import retried_on_lock_conflict

    budgets_ensure(federation=federation_with_data)
    northwind, contoso = PrivacyBudget.objects.filter(federation=federation_with_data).order_by(
        "id"
    )
    barrier, attempts = Barrier(2), []

    @retried_on_lock_conflict
    def crossed(order):
        return lock_both_budgets(*order, barrier, attempts)

    outcomes = run_at_once(crossed, [(northwind, contoso), (contoso, northwind)])

    assert outcomes == ["locked both", "locked both"]
    # PostgreSQL broke the deadlock by rolling one back and that one ran again; on a slow machine a retry may
    # take its first lock before the other thread's second and cross again, so more attempts are also right
    assert len(attempts) >= 3

    barrier, attempts = Barrier(2), []

    def crossed_inside_a_callers_transaction(order):
        try:
            with (
                transaction.atomic()
            ):  # the caller's transaction: rolled back too, so nothing is retried
                return retried_on_lock_conflict(lock_both_budgets)(*order, barrier, attempts)
        except Exception as error:
            return domain_error_from(error)

    outcomes = run_at_once(
        crossed_inside_a_callers_transaction, [(northwind, contoso), (contoso, northwind)]
    )

    [refusal] = [outcome for outcome in outcomes if outcome != "locked both"]
    assert isinstance(refusal, TryAgain) and refusal.status_code == 503
    assert str(refusal) == (
        "Another request changed the same records at the same moment and this one was rolled back; "
        "nothing was done. Send it again."
    )
    assert len(attempts) == 2
