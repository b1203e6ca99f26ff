"""Reserve, charge and release privacy budgets for any spender: one small protocol, no code here per consumer.

A spender says what it is (``spender_kind`` and ``id``, the ledger's generic reference to it), in which federation,
in which unit its ε is counted (example-level or party-level) and what each silo's data costs
(:meth:`Spender.privacy_costs`: organisation id → :class:`workers.privacy.costs.PrivacyCost`, whose report carries
the δ). A new way to spend privacy implements it in its own app, calls the three services below, and registers how
its kind is named and linked on the ledger's pages (:func:`spender_kind_register`); the budgets app never names it.
Every change is made under the budget rows' locks with a ledger line, as :mod:`market.budgets.ledger` does for all
spends; a request that does not fit raises :class:`market.budgets.ledger.BudgetExceeded` before anything is
written.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from django.db import IntegrityError, transaction
from django.urls import reverse

from market.accounts.models import User
from market.budgets.ledger import (
    BudgetAmounts,
    budget_amounts,
    budget_entry_write,
    budget_refuse,
    budget_shortfall,
    budget_shortfall_line,
    budgets_locked,
    budgets_reserved_by,
    epsilon_decimal,
    ledger_state,
    spender_key,
)
from market.budgets.models import EntryKind, PrivacyBudget
from market.constraints import violated_constraint
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


#: A ledger line's parameters: one dict for every silo's line, or a function of the silo's cost.
LineParameters = dict | Callable[[PrivacyCost], dict] | None


def _line_parameters(parameters: LineParameters, cost: PrivacyCost) -> dict | None:
    return parameters(cost) if callable(parameters) else parameters


def _locked_with_state(spender: Spender, organisation_ids):
    budgets = budgets_locked(federation=spender.federation, organisation_ids=organisation_ids)
    return [(budget, ledger_state(budget)) for budget in budgets]


def _write_or_refuse(budget: PrivacyBudget, amounts: BudgetAmounts, *, refusal, **line) -> None:
    """Write the line in a savepoint: the CHECK constraint has the last word on overspending, and when it alone
    catches one the answer is the budget's sentence (``refusal(shortfall)``), never a database error."""
    shortfall = budget_shortfall_line(
        budget, amounts
    )  # before the write sets the row's new amounts
    try:
        with transaction.atomic():
            budget_entry_write(budget, amounts, **line)
    except IntegrityError as error:
        if violated_constraint(error) != "budget_never_overspent":
            raise
        refusal(shortfall)


def budget_reserve(
    *,
    spender: Spender,
    actor: User | None,
    parameters: LineParameters = None,
    described_as: str | None = None,
) -> None:
    """Reserve ``spender.privacy_costs()`` on every silo it names, or raise BudgetExceeded naming the silos short
    of budget without writing. Reserving again for a spender already reserved or charged changes nothing.

    ``described_as``: how a refusal names it (default "<kind> #<id>"; a spender whose row the refusal rolls back
    is better named by what it is, since its id will later name another)."""
    key = spender_key(spender.spender_kind, spender.id)
    costs = dict(spender.privacy_costs())
    what = described_as or f"{spender.spender_kind} #{spender.id}"

    def refuse(shortfalls: list[dict]):
        budget_refuse(spender.federation, shortfalls, what=what, unit=spender.privacy_unit)

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
            refuse(shortfalls)
        for budget, amounts, cost in plans:
            _write_or_refuse(
                budget,
                amounts,
                refusal=lambda shortfall: refuse([shortfall]),
                kind=EntryKind.RESERVE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                spender=key,
                actor=actor,
                parameters=_line_parameters(parameters, cost),
            )


def budget_charge(
    *,
    spender: Spender,
    costs: Mapping[int, PrivacyCost] | None = None,
    actor: User | None = None,
    parameters: LineParameters = None,
    described_as: str | None = None,
    reason: str = "",
) -> None:
    """Charge what the spender spent (``costs``, default :meth:`Spender.privacy_costs`) on every silo it names,
    closing its reservation there (a spender may also be charged without one, as an upload is); BudgetExceeded,
    without writing, where the actual spend no longer fits. Charging a spender twice changes nothing.

    ``described_as``: how a refusal names it (default "<kind> #<id>'s actual spend"); ``reason``: why it is
    charged, as the silo reads it on its ledger line."""
    key = spender_key(spender.spender_kind, spender.id)
    costs = dict(costs if costs is not None else spender.privacy_costs())
    what = described_as or f"{spender.spender_kind} #{spender.id}'s actual spend"

    def refuse(shortfall: dict):
        budget_refuse(spender.federation, [shortfall], what=what, unit=spender.privacy_unit)

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
                refuse(shortfall)
            _write_or_refuse(
                budget,
                amounts,
                refusal=refuse,
                kind=EntryKind.CHARGE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                spender=key,
                actor=actor,
                parameters=_line_parameters(parameters, cost),
                reason=reason,
            )


def budget_release(*, spender: Spender, reason: str = "") -> None:
    """Free the spender's open reservations (it ended without spending), found from its own ledger lines (its costs
    are not asked again); nothing to release changes nothing. ``reason``: why, as the silo reads it."""
    key = spender_key(spender.spender_kind, spender.id)
    with transaction.atomic():
        for budget in budgets_reserved_by(spender_kind=spender.spender_kind, spender_id=spender.id):
            state = ledger_state(budget)
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
                reason=reason,
            )


# --- how the ledger's pages name a spender ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SpenderKind:
    """How pages, notices and exports name the spenders of one kind; registered by the app that owns them."""

    spender_kind: str
    #: What one is called ("Job"): a line reads "<label> #<id>".
    label: str
    #: The URL name of its page, taking its id (None: it has no page of its own).
    page: str | None = None
    #: Whether its charges send the charged silo a notice (not a silo's own upload: it chose to spend).
    notifies: bool = True


_SPENDER_KINDS: dict[str, SpenderKind] = {}


def spender_kind_register(spender_kind: SpenderKind) -> None:
    """Called by the owning app when it is ready (its ``AppConfig.ready``); registering again replaces."""
    _SPENDER_KINDS[spender_kind.spender_kind] = spender_kind


def spender_kind_get(spender_kind: str) -> SpenderKind:
    """The registered kind, or one named by its kind alone (a spender no app registered: no page, notices on)."""
    return _SPENDER_KINDS.get(spender_kind) or SpenderKind(spender_kind, spender_kind.capitalize())


def spender_named(spender_kind: str, spender_id: int | None) -> tuple[str, str]:
    """A spender's name ("Job #3") and the address of its page ("" when it has none), for pages and notices."""
    described = spender_kind_get(spender_kind)
    url = reverse(described.page, args=[spender_id]) if described.page else ""
    return f"{described.label} #{spender_id}", url
