"""The one rule for the thresholds a charge passes (notices and webhooks follow it): the spend after the charge
against the spend after the budget's previous ledger line, since RDP-composed spends are not sums."""

from decimal import Decimal

import pytest

from market.budgets.models import BudgetEntry, EntryKind
from market.budgets.thresholds import (
    budget_thresholds_crossed,
    entry_spent_unit,
    entry_thresholds_crossed,
)


@pytest.mark.parametrize(
    ("before", "after", "crossed"),
    [
        ("0", "7.9", []),
        ("0", "8", [Decimal("0.8")]),
        ("7.9", "10", [Decimal("0.8"), Decimal("1")]),
        ("8", "9.9", []),
        ("9", "10", [Decimal("1")]),
        ("10", "10", []),
    ],
)
def test_a_charge_crosses_the_thresholds_it_passes_from_below(before, after, crossed):
    assert (
        budget_thresholds_crossed(
            spent_before=Decimal(before), spent_after=Decimal(after), limit=Decimal(10)
        )
        == crossed
    )


@pytest.mark.django_db
def test_a_composed_charge_passes_only_what_the_previous_ledger_line_had_not(
    composed_charges, silo_user
):
    charges = list(
        BudgetEntry.objects.filter(
            budget__organisation=silo_user.organisation, kind=EntryKind.CHARGE
        ).order_by("id")
    )
    first, second = charges
    limit = first.epsilon_limit_after
    assert first.spent_after == Decimal("0.8") * limit
    # the second line's own ε is more than its charge added: spent_after − ε falls back under 80 %
    assert second.spent_after - second.epsilon < Decimal("0.8") * limit < second.spent_after < limit
    assert [entry_thresholds_crossed(entry) for entry in charges] == [[Decimal("0.8")], []]
    assert [entry_spent_unit(entry) for entry in charges] == ["party-level", "party-level"]


@pytest.mark.django_db
def test_lines_other_than_charges_pass_no_threshold(composed_charges, silo_user):
    others = BudgetEntry.objects.filter(budget__organisation=silo_user.organisation).exclude(
        kind=EntryKind.CHARGE
    )
    assert sorted({entry.kind for entry in others}) == ["adjust", "reserve"]
    assert all(entry_thresholds_crossed(entry) == [] for entry in others)
