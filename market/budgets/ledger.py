"""The ledger of a privacy budget, replayed, and the only code that writes budget rows and ledger lines.

The spend of a budget is never a sum of floats kept in the database: under the row lock the ledger's
costs are composed again by the accountant (:func:`workers.privacy.costs.compose_costs`), and the
result is stored (rounded up to 1e-6) beside the rule that produced it. Budget rows are always locked
in id order, so two requests touching the same silos cannot deadlock.
"""

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from market.accounts.models import Organisation, User
from market.budgets.models import EPSILON_QUANTUM, BudgetEntry, EntryKind, PrivacyBudget
from market.errors import Conflict, InvalidInput
from market.federations.models import Federation, Membership
from workers.privacy.costs import PrivacyCost, compose_costs


class BudgetExceeded(Conflict):
    """A request would overspend at least one silo's budget. ``details["silos"]`` lists each such silo with
    ``organisation_id``, ``organisation``, ``budget_id``, ``needed`` and ``remaining`` (ε, as strings)."""

    def __init__(self, message: str, *, details: dict):
        super().__init__(message)
        self.details = details


#: Largest storable ε; limits stay below it, so an ε clamped to it (or an infinite one) never fits.
EPSILON_CEILING = Decimal("999999.999999")


def epsilon_decimal(epsilon: float) -> Decimal:
    """ε as a stored Decimal, rounded up to 1e-6 so that rounding never hides a spend (clamped to the column)."""
    epsilon = float(epsilon)
    if not epsilon < float(EPSILON_CEILING):  # also catches inf and nan
        return EPSILON_CEILING
    return Decimal(repr(epsilon)).quantize(EPSILON_QUANTUM, rounding=ROUND_CEILING)


# --- budgets exist for every member --------------------------------------------------------------------------------


def budgets_ensure(*, federation: Federation, organisation_ids=None) -> None:
    """Create the missing budgets of members (all, or those listed) with the federation's defaults.

    ``ON CONFLICT DO NOTHING``: two requests creating the same budget at once both succeed, one row results.
    """
    members = Membership.objects.filter(federation=federation)
    if organisation_ids is not None:
        members = members.filter(organisation_id__in=list(organisation_ids))
    missing = members.exclude(organisation__privacy_budgets__federation=federation).values_list(
        "organisation_id", flat=True
    )
    PrivacyBudget.objects.bulk_create(
        [
            PrivacyBudget(
                federation=federation,
                organisation_id=organisation_id,
                epsilon_limit=federation.default_epsilon_limit,
                delta=federation.default_delta,
            )
            for organisation_id in missing
        ],
        ignore_conflicts=True,
    )


def budget_delta(*, federation: Federation, organisation_id: int) -> Decimal:
    """The δ of a silo's budget (created if missing), for a spender whose cost is computed at it."""
    budgets_ensure(federation=federation, organisation_ids=[organisation_id])
    delta = (
        PrivacyBudget.objects.filter(federation=federation, organisation_id=organisation_id)
        .values_list("delta", flat=True)
        .first()
    )
    if delta is None:
        raise InvalidInput(f"Only members of '{federation.slug}' spend privacy there.")
    return delta


def budgets_locked(*, federation: Federation, organisation_ids) -> list[PrivacyBudget]:
    """The budgets of these silos, created if missing, locked FOR UPDATE in id order (no deadlocks)."""
    organisation_ids = sorted(set(organisation_ids))
    budgets_ensure(federation=federation, organisation_ids=organisation_ids)
    budgets = list(
        PrivacyBudget.objects.select_for_update(of=("self",))
        .select_related("organisation")
        .filter(federation=federation, organisation_id__in=organisation_ids)
        .order_by("id")
    )
    missing = set(organisation_ids) - {budget.organisation_id for budget in budgets}
    if missing:
        names = ", ".join(
            Organisation.objects.filter(id__in=missing).values_list("name", flat=True)
        )
        raise InvalidInput(
            f"{names} must be members of '{federation.slug}' to spend privacy there."
        )
    return budgets


def budgets_reserved_by(*, spender_kind: str, spender_id: int) -> list[PrivacyBudget]:
    """The budgets on which the spender ever reserved, locked FOR UPDATE in id order (what a release may free)."""
    reserved_in = BudgetEntry.objects.filter(
        spender_kind=spender_kind, spender_id=spender_id, kind=EntryKind.RESERVE
    ).values("budget_id")
    return list(
        PrivacyBudget.objects.select_for_update(of=("self",))
        .select_related("organisation")
        .filter(id__in=reserved_in)
        .order_by("id")
    )


# --- the ledger, replayed ------------------------------------------------------------------------------------------


#: A spender as the ledger names it (:mod:`market.budgets.spending`): its kind and id.
SpenderKey = tuple[str, int]


@dataclass
class LedgerState:
    """A budget's costs, replayed from its ledger: what is charged, and the reservations still open per spender."""

    charged: list[PrivacyCost]
    open_reservations: dict[SpenderKey, tuple[PrivacyCost, BudgetEntry]]
    #: Every spender with a charged line.
    charged_spenders: set[SpenderKey]

    def committed(self) -> list[PrivacyCost]:
        return self.charged + [cost for cost, _ in self.open_reservations.values()]


def spender_key(spender_kind: str, spender_id: int) -> SpenderKey:
    """The key of a spender's lines in :class:`LedgerState` (:mod:`market.budgets.spending`)."""
    return (spender_kind, spender_id)


def ledger_state(budget: PrivacyBudget) -> LedgerState:
    state = LedgerState(charged=[], open_reservations={}, charged_spenders=set())
    for entry in budget.entries.order_by("id"):
        key = spender_key(entry.spender_kind, entry.spender_id)
        if entry.kind == EntryKind.RESERVE:
            state.open_reservations[key] = (PrivacyCost.from_dict(entry.cost), entry)
        elif entry.kind in (EntryKind.CHARGE, EntryKind.RELEASE):
            state.open_reservations.pop(key, None)
        if entry.kind == EntryKind.CHARGE:
            state.charged.append(PrivacyCost.from_dict(entry.cost))
            state.charged_spenders.add(key)
    return state


@dataclass(frozen=True)
class BudgetAmounts:
    spent: Decimal
    reserved: Decimal
    rule: str

    @property
    def committed(self) -> Decimal:
        return self.spent + self.reserved


def _stored_epsilon(costs: list[PrivacyCost], *, delta: float) -> tuple[Decimal, str]:
    """The composed ε of ``costs`` as stored, and its rule: the Rényi part rounded up to 1e-6, plus the declared ε
    added as the decimals they were declared in (summed as floats, 2.5 + 7.500001 would round up to 7.500002 more,
    and a silo declaring exactly its remainder could be refused)."""
    composition = compose_costs(costs, delta=delta)
    declared = sum(
        (Decimal(repr(cost.report.epsilon)) for cost in costs if cost.rdp is None), Decimal(0)
    )
    total = (epsilon_decimal(composition.rdp_epsilon) + declared).quantize(
        EPSILON_QUANTUM, rounding=ROUND_CEILING
    )
    return min(total, EPSILON_CEILING), composition.rule


def budget_amounts(
    *, budget: PrivacyBudget, charged: list[PrivacyCost], reserved: list[PrivacyCost]
) -> BudgetAmounts:
    """Spent and reserved ε composed by the accountant at the budget's δ (reserved = what reservations add)."""
    delta = float(budget.delta)
    spent, _ = _stored_epsilon(charged, delta=delta)
    everything, rule = _stored_epsilon([*charged, *reserved], delta=delta)
    committed = max(everything, spent)
    return BudgetAmounts(spent=spent, reserved=committed - spent, rule=rule)


def budget_amounts_by_unit(budget: PrivacyBudget) -> dict[str, BudgetAmounts]:
    """Spent and reserved ε of each unit's costs alone ("party-level": party-level L1 jobs; "example-level": L2
    submissions, FAug generators and record-level L1 jobs), composed like the total. The total is example-level as soon as one cost is: a party-level
    guarantee implies the same ε at example level (one example lies in one silo's data), never the reverse."""
    state = ledger_state(budget)
    reserved = [cost for cost, _ in state.open_reservations.values()]
    units = sorted({cost.report.unit for cost in [*state.charged, *reserved]})
    return {
        unit: budget_amounts(
            budget=budget,
            charged=[cost for cost in state.charged if cost.report.unit == unit],
            reserved=[cost for cost in reserved if cost.report.unit == unit],
        )
        for unit in units
    }


def budget_shortfall(budget: PrivacyBudget, amounts: BudgetAmounts) -> dict | None:
    """What the silo lacks for these amounts (the details of :class:`BudgetExceeded`), or None when they fit."""
    if amounts.committed <= budget.epsilon_limit:
        return None
    return budget_shortfall_line(budget, amounts)


def budget_shortfall_line(budget: PrivacyBudget, amounts: BudgetAmounts) -> dict:
    return {
        "organisation_id": budget.organisation_id,
        "organisation": budget.organisation.name,
        "budget_id": budget.id,
        "needed": str(amounts.committed - budget.spent - budget.reserved),
        "remaining": str(budget.remaining),
        "epsilon_limit": str(budget.epsilon_limit),
    }


def budget_refuse(federation: Federation, shortfalls: list[dict], *, what: str, unit: str) -> None:
    first = shortfalls[0]
    others = f" ({len(shortfalls) - 1} other silo(s) too)" if len(shortfalls) > 1 else ""
    raise BudgetExceeded(
        f"{first['organisation']}'s privacy budget in '{federation.slug}' has ε = {first['remaining']} left, but "
        f"{what} needs ε = {first['needed']} more ({unit}){others}. Add more noise, query fewer public rows, or ask "
        "an operator to raise the limit.",
        details={"federation": federation.slug, "silos": shortfalls},
    )


def budget_entry_write(
    budget: PrivacyBudget,
    amounts: BudgetAmounts,
    *,
    kind: str,
    epsilon: Decimal,
    cost: PrivacyCost | None,
    spender: SpenderKey | None = None,
    actor: User | None = None,
    reason: str = "",
    parameters: dict | None = None,
) -> BudgetEntry:
    """Apply ``amounts`` to the budget row and append the line. ``spender``: what spent, as ``(kind, id)`` (none for
    a limit change). Whoever reacts to a line (notices, webhooks) listens to its ``post_save``."""
    spender_kind, spender_id = spender or ("", None)
    budget.spent, budget.reserved, budget.composition_rule = (
        amounts.spent,
        amounts.reserved,
        amounts.rule,
    )
    budget.save(
        update_fields=["spent", "reserved", "composition_rule", "epsilon_limit", "updated_at"]
    )
    report = cost.report if cost else None
    return BudgetEntry.objects.create(
        budget=budget,
        kind=kind,
        epsilon=epsilon,
        unit=report.unit if report else "",
        delta=Decimal(repr(report.delta)) if report else None,
        mechanism=report.mechanism if report else "",
        parameters=parameters or {},
        cost=cost.as_dict() if cost else None,
        spender_kind=spender_kind,
        spender_id=spender_id,
        actor=actor if actor is not None and actor.is_authenticated else None,
        reason=reason,
        composition_rule=amounts.rule,
        spent_after=amounts.spent,
        reserved_after=amounts.reserved,
        epsilon_limit_after=budget.epsilon_limit,
    )
