"""Which shares of a budget's limit a charge took its spend past: the one rule the silo's notices
(market.notifications) and the webhook ``budget.threshold_reached`` (market.webhooks) both follow.

The spend before a charge is the ``spent_after`` of the budget's previous ledger line, never ``spent_after − ε``:
charges compose by RDP (or add declared ε), so the budget's spend is not the sum of its lines' ε, and subtracting
the line's ε would find a threshold passed earlier to be passed again.
"""

from decimal import Decimal

from market.budgets.models import BudgetEntry, EntryKind
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL

#: The shares of a budget's limit whose passing by a charge is told once each.
BUDGET_THRESHOLDS = (Decimal("0.8"), Decimal("1"))


def budget_thresholds_crossed(
    *, spent_before: Decimal, spent_after: Decimal, limit: Decimal
) -> list[Decimal]:
    """The thresholds of :data:`BUDGET_THRESHOLDS` that the spend passed from below (ε, as fractions of ``limit``)."""
    if limit <= 0:
        return []
    return [
        threshold
        for threshold in BUDGET_THRESHOLDS
        if spent_before < threshold * limit <= spent_after
    ]


def entry_thresholds_crossed(entry: BudgetEntry) -> list[Decimal]:
    """The thresholds a charge line newly passed: its budget's spend after it against the spend after the
    budget's previous ledger line, at the limit after it. Lines of other kinds spend nothing and pass none."""
    if entry.kind != EntryKind.CHARGE:
        return []
    earlier = BudgetEntry.objects.filter(budget_id=entry.budget_id)
    if entry.id is not None:  # a line not written yet follows the budget's last one
        earlier = earlier.filter(id__lt=entry.id)
    previous = earlier.order_by("-id").values_list("spent_after", flat=True).first()
    return budget_thresholds_crossed(
        spent_before=previous if previous is not None else Decimal(0),
        spent_after=entry.spent_after,
        limit=entry.epsilon_limit_after,
    )


def entry_spent_unit(entry: BudgetEntry) -> str:
    """The unit of the budget's spend once ``entry`` is applied: party-level only while every charge so far is
    (the rule of workers.privacy.costs.compose_costs), else example-level."""
    example_level_charged = (
        BudgetEntry.objects.filter(
            budget_id=entry.budget_id, id__lte=entry.id, kind=EntryKind.CHARGE
        )
        .exclude(unit=PARTY_LEVEL)
        .exists()
    )
    return EXAMPLE_LEVEL if example_level_charged else PARTY_LEVEL
