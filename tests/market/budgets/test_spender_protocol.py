"""A new way to spend privacy needs no budgets code: this module defines a spender the budgets app has never heard
of (a research grant that spends a declared ε of each silo's examples), and the generic services reserve, charge and
release it with ledger lines that name it by kind and id, under the same limits as every other spend."""

from dataclasses import dataclass
from decimal import Decimal

import pytest

from market.budgets.ledger import BudgetExceeded
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.spending import Spender, budget_charge, budget_release, budget_reserve
from market.federations.models import Federation
from workers.privacy.costs import declared_cost
from workers.privacy.reports import EXAMPLE_LEVEL


@dataclass
class ResearchGrant:
    """Spends ``epsilon`` of every listed silo's examples (example-level, δ = 1e-6); known only to this test."""

    id: int
    federation: Federation
    silos: tuple[int, ...]
    epsilon: float
    spender_kind = "research-grant"
    privacy_unit = EXAMPLE_LEVEL

    def privacy_costs(self):
        return {silo: declared_cost(epsilon=self.epsilon, delta=1e-6) for silo in self.silos}


@pytest.fixture
def grant(federation_with_data, members):
    silos = tuple(user.organisation_id for user in members)
    return ResearchGrant(id=7, federation=federation_with_data, silos=silos, epsilon=1.5)


def _budgets():
    return {b.organisation_id: (b.spent, b.reserved) for b in PrivacyBudget.objects.all()}


def _lines():
    return list(
        BudgetEntry.objects.order_by("id").values_list(
            "kind", "spender_kind", "spender_id", "epsilon", "unit", "job_id"
        )
    )


def test_a_spender_defined_outside_the_budgets_app_is_reserved_then_charged(grant, operator):
    assert isinstance(grant, Spender)
    budget_reserve(spender=grant, actor=operator)
    budget_reserve(spender=grant, actor=operator)  # again: nothing more is reserved
    assert set(_budgets().values()) == {(Decimal("0"), Decimal("1.500000"))}
    budget_charge(spender=grant)
    budget_charge(spender=grant)  # again: nothing more is charged
    assert set(_budgets().values()) == {(Decimal("1.500000"), Decimal("0"))}
    one = Decimal("1.500000")
    assert _lines() == [  # one line per silo and step
        ("reserve", "research-grant", 7, one, EXAMPLE_LEVEL, None),
        ("reserve", "research-grant", 7, one, EXAMPLE_LEVEL, None),
        ("charge", "research-grant", 7, one, EXAMPLE_LEVEL, None),
        ("charge", "research-grant", 7, one, EXAMPLE_LEVEL, None),
    ]


def test_a_released_spender_frees_its_reservation_and_a_second_release_changes_nothing(
    grant, operator
):
    budget_reserve(spender=grant, actor=operator)
    budget_release(spender=grant)
    budget_release(spender=grant)
    assert set(_budgets().values()) == {(Decimal("0"), Decimal("0"))}
    assert [line[0] for line in _lines()] == [
        "reserve",
        "reserve",
        "release",
        "release",
    ]  # two silos


def test_a_spender_that_does_not_fit_is_refused_naming_the_silo_and_nothing_is_written(
    grant, operator
):
    grant.epsilon = 11  # the limit is ε = 10
    with pytest.raises(
        BudgetExceeded, match=r"research-grant #7 needs ε = 11\.000000 more \(example-level\)"
    ):
        budget_reserve(spender=grant, actor=operator)
    assert not BudgetEntry.objects.exists()
    assert not PrivacyBudget.objects.exclude(spent=0, reserved=0).exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_names_the_spender_of_every_existing_ledger_line(make_job, operator):
    """Lines written before the generic reference (here: a job's reservation, with the column emptied by migrating
    back) name their spender once migrated forward; the ledger stays append-only."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from market.budgets.services import budget_reserve_for_job

    job = make_job()
    budget_reserve_for_job(job=job, actor=operator)
    before, latest = (
        ("budgets", "0003_budgetentry_augmentation"),
        ("budgets", "0004_budgetentry_spender"),
    )
    MigrationExecutor(connection).migrate([before])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([latest])
    assert set(BudgetEntry.objects.values_list("kind", "spender_kind", "spender_id", "job_id")) == {
        ("reserve", "job", job.id, job.id)
    }
    from django.db import DatabaseError, transaction

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        BudgetEntry.objects.update(spender_kind="changed")
