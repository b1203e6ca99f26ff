"""A new way to spend privacy needs no budgets code: this module defines a spender the budgets app has never heard
of (a research grant that spends a declared ε of each silo's examples), and the generic services reserve, charge and
release it with ledger lines that name it by kind and id, under the same limits as every other spend; it registers
how its kind is named, and the ledger's API and page, and the silo's notices, name it so. Jobs, L2 submissions and
FAug generators are spenders the same way (market/jobs/spending.py, market/submissions/spending.py,
market/augmentations/spending.py)."""

from dataclasses import dataclass
from decimal import Decimal

import pytest

from market.budgets.ledger import BudgetExceeded
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.spending import (
    Spender,
    SpenderKind,
    budget_charge,
    budget_release,
    budget_reserve,
    spender_kind_register,
)
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
            "kind", "spender_kind", "spender_id", "epsilon", "unit"
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
        ("reserve", "research-grant", 7, one, EXAMPLE_LEVEL),
        ("reserve", "research-grant", 7, one, EXAMPLE_LEVEL),
        ("charge", "research-grant", 7, one, EXAMPLE_LEVEL),
        ("charge", "research-grant", 7, one, EXAMPLE_LEVEL),
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


def test_a_spender_is_charged_without_a_reservation_and_an_overspend_is_refused_without_writing(
    grant, operator
):
    budget_charge(spender=grant, actor=operator)  # as an upload is: nothing reserved before
    assert set(_budgets().values()) == {(Decimal("1.500000"), Decimal("0"))}
    refused = ResearchGrant(id=8, federation=grant.federation, silos=grant.silos, epsilon=9)
    with pytest.raises(BudgetExceeded) as error:
        budget_charge(spender=refused)
    assert "research-grant #8's actual spend needs ε = 9.000000 more (example-level)" in str(
        error.value
    )
    assert error.value.status_code == 409
    assert {silo["remaining"] for silo in error.value.details["silos"]} == {"8.500000"}
    assert set(_budgets().values()) == {(Decimal("1.500000"), Decimal("0"))}
    assert {line[1:3] for line in _lines()} == {("research-grant", 7)}


def test_the_ledger_names_a_registered_spender_by_its_label_and_notifies_its_silos(
    grant, operator, operator_api, client
):
    from market.notifications.models import Notification

    spender_kind_register(SpenderKind(spender_kind="research-grant", label="Research grant"))
    budget_charge(spender=grant)
    slug = grant.federation.slug
    lines = operator_api.get(f"/api/federations/{slug}/budget-ledger/").json()
    assert {
        (line["spender_kind"], line["spender_id"], line["spender"], line["spender_url"])
        for line in lines
    } == {("research-grant", 7, "Research grant #7", None)}
    assert {(line["job_id"], line["submission_id"], line["augmentation_id"]) for line in lines} == {
        (None, None, None)
    }
    client.force_login(operator)
    assert (
        "Research grant #7" in client.get(f"/federations/{slug}/budgets/ledger/").content.decode()
    )
    subjects = set(Notification.objects.values_list("organisation_id", "subject"))
    assert subjects == {
        (silo, f"Research grant #7 charged your privacy budget in {grant.federation.name}")
        for silo in grant.silos
    }


def test_a_spender_no_app_registered_is_named_by_its_kind_and_id(grant, operator_api):
    grant.spender_kind = "survey"
    budget_charge(spender=grant)
    lines = operator_api.get(f"/api/federations/{grant.federation.slug}/budget-ledger/").json()
    assert {(line["spender"], line["spender_url"]) for line in lines} == {("Survey #7", None)}


@pytest.mark.django_db(transaction=True)
def test_the_migrations_move_every_ledger_line_between_foreign_keys_and_the_generic_reference(
    make_job, operator
):
    """Migrating back to the foreign key per consumer (0003) puts each line's spender in its column, and forward
    again (0004, 0005) names it by kind and id only; the ledger stays append-only."""
    from django.db import DatabaseError, connection, transaction
    from django.db.migrations.executor import MigrationExecutor

    from market.jobs.spending import job_budget_reserve

    job = make_job()
    job_budget_reserve(job=job, actor=operator)
    before, latest = (
        ("budgets", "0003_budgetentry_augmentation"),
        ("budgets", "0005_budgetentry_spender_only"),
    )
    MigrationExecutor(connection).migrate([before])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kind, job_id, submission_id, augmentation_id FROM budgets_budgetentry"
        )
        assert set(cursor.fetchall()) == {("reserve", job.id, None, None)}
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([latest])
    assert set(BudgetEntry.objects.values_list("kind", "spender_kind", "spender_id")) == {
        ("reserve", "job", job.id)
    }
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        BudgetEntry.objects.update(spender_kind="changed")
