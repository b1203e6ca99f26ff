"""Reserve, charge and release privacy budgets for any spender: one small protocol, no code here per consumer.

A spender says what it is (``spender_kind`` and ``id``, the ledger's generic reference to it), in which federation,
in which unit its ε is counted (example-level or party-level) and what each silo's data costs
(:meth:`Spender.privacy_costs`: organisation id → :class:`workers.privacy.costs.PrivacyCost`, whose report carries
the δ). A new way to spend privacy implements it in its own app and calls the three services below; the budgets
app never names it. Every change is made under the budget rows' locks with a ledger line, as
:mod:`market.budgets.ledger` does for all spends; a request that does not fit raises
:class:`market.budgets.ledger.BudgetExceeded` before anything is written.
"""

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from django.db import transaction

from market.accounts.models import User
from market.budgets.ledger import (
    budget_amounts,
    budget_entry_write,
    budget_refuse,
    budget_shortfall,
    budgets_locked,
    epsilon_decimal,
    ledger_state,
    spender_key,
)
from market.budgets.models import EntryKind
from market.federations.models import Federation
from workers.privacy.costs import PrivacyCost


@runtime_checkable
class Spender(Protocol):
    """What the budgets need to know of anything that spends privacy."""

    #: What it is, as the ledger names it ("job", "submission", "augmentation", ...); with ``id``, the reference.
    spender_kind: str
    id: int
    federation: Federation
    #: The unit its ε is counted in: workers.privacy.reports.EXAMPLE_LEVEL or PARTY_LEVEL.
    privacy_unit: str

    def privacy_costs(self) -> Mapping[int, PrivacyCost]:
        """Which silos it spends (organisation ids) and each one's data-independent cost (its report: ε, δ)."""


def _locked_with_state(spender: Spender, organisation_ids):
    budgets = budgets_locked(federation=spender.federation, organisation_ids=organisation_ids)
    return [(budget, ledger_state(budget)) for budget in budgets]


def budget_reserve(*, spender: Spender, actor: User | None, parameters: dict | None = None) -> None:
    """Reserve ``spender.privacy_costs()`` on every silo it names, or raise BudgetExceeded naming the silos short
    of budget without writing. Reserving again for a spender already reserved or charged changes nothing."""
    key = spender_key(spender.spender_kind, spender.id)
    costs = dict(spender.privacy_costs())
    with transaction.atomic():
        plans, shortfalls = [], []
        for budget, state in _locked_with_state(spender, costs):
            if key in state.open_reservations or key in state.charged_spenders:
                continue
            cost = costs[budget.organisation_id]
            amounts = budget_amounts(
                budget=budget,
                charged=state.charged,
                reserved=[*(c for c, _ in state.open_reservations.values()), cost],
            )
            shortfall = budget_shortfall(budget, amounts)
            shortfalls += [shortfall] if shortfall else []
            plans.append((budget, amounts, cost))
        if shortfalls:
            what = f"{spender.spender_kind} #{spender.id}"
            budget_refuse(spender.federation, shortfalls, what=what, unit=spender.privacy_unit)
        for budget, amounts, cost in plans:
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.RESERVE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                spender=key,
                actor=actor,
                parameters=parameters,
            )


def budget_charge(
    *,
    spender: Spender,
    costs: Mapping[int, PrivacyCost] | None = None,
    parameters: dict | None = None,
) -> None:
    """Charge what the spender spent (``costs``, default :meth:`Spender.privacy_costs`) on every silo it names,
    closing its reservation there; BudgetExceeded, without writing, where the actual spend no longer fits. Charging
    a spender twice changes nothing."""
    key = spender_key(spender.spender_kind, spender.id)
    costs = dict(costs if costs is not None else spender.privacy_costs())
    with transaction.atomic():
        for budget, state in _locked_with_state(spender, costs):
            if key in state.charged_spenders:
                continue
            cost = costs[budget.organisation_id]
            state.open_reservations.pop(key, None)
            amounts = budget_amounts(
                budget=budget,
                charged=[*state.charged, cost],
                reserved=[c for c, _ in state.open_reservations.values()],
            )
            shortfall = budget_shortfall(budget, amounts)
            if shortfall:
                what = f"{spender.spender_kind} #{spender.id}'s actual spend"
                budget_refuse(spender.federation, [shortfall], what=what, unit=spender.privacy_unit)
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.CHARGE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                spender=key,
                parameters=parameters,
            )


def budget_release(*, spender: Spender) -> None:
    """Free the spender's open reservations (it ended without spending); nothing to release changes nothing."""
    key = spender_key(spender.spender_kind, spender.id)
    with transaction.atomic():
        for budget, state in _locked_with_state(spender, spender.privacy_costs()):
            if key not in state.open_reservations:
                continue
            cost, entry = state.open_reservations.pop(key)
            amounts = budget_amounts(
                budget=budget,
                charged=state.charged,
                reserved=[c for c, _ in state.open_reservations.values()],
            )
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.RELEASE,
                epsilon=entry.epsilon,
                cost=cost,
                spender=key,
                parameters=entry.parameters,
            )
