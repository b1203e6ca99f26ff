"""Privacy budgets: refusals and limits. Reserving, charging and releasing for any spender (a job, an L2 submission,
an FAug generator, ...) is :mod:`market.budgets.spending`; each spender's app calls it with its own adapter.

A request that does not fit raises :class:`BudgetExceeded` before anything is written; the caller's
transaction rolls back, and the caller records the refusal with :func:`budget_refusal_record` after the
rolled-back block. How spends are composed and stored: :mod:`market.budgets.ledger`.
"""

from decimal import ROUND_CEILING, Decimal, InvalidOperation

from django.db import transaction

from market.accounts.models import User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.budgets.ledger import (
    BudgetAmounts,
    BudgetExceeded,
    budget_amounts,
    budget_entry_write,
    budgets_ensure,
    epsilon_decimal,
    ledger_state,
)
from market.budgets.models import EPSILON_QUANTUM, EntryKind, PrivacyBudget
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied

__all__ = [
    "BudgetExceeded",
    "budget_amounts",
    "budget_limit_set",
    "budget_refusal_record",
    "budgets_ensure",
    "epsilon_decimal",
    "ledger_state",
]


# --- refusals and limits -------------------------------------------------------------------------------------------


def budget_refusal_record(
    *,
    error: BudgetExceeded,
    actor: User | None,
    target=None,
    request=None,
    details: dict | None = None,
) -> None:
    """Audit a refusal ("budget.refused"); call after the rolled-back block, so the event survives."""
    audit_record(
        action="budget.refused",
        outcome=AuditOutcome.REFUSED,
        actor=actor,
        target=target,
        request=request,
        details={**error.details, "message": str(error), **(details or {})},
    )


def _clean_limit(epsilon_limit) -> Decimal:
    try:
        limit = Decimal(str(epsilon_limit))
    except (InvalidOperation, ValueError) as error:
        raise InvalidInput(f"The ε limit must be a number, got {epsilon_limit!r}.") from error
    if not limit.is_finite() or limit < 0 or limit > Decimal("999999"):
        raise InvalidInput("The ε limit must be a number from 0 to 999999.")
    return limit.quantize(EPSILON_QUANTUM, rounding=ROUND_CEILING)


def budget_limit_set(
    *, budget_id: int, epsilon_limit, reason: str, actor: User, request=None
) -> PrivacyBudget:
    """An operator sets a silo's ε limit; refused (409) below what is already spent and reserved. Audited."""
    if not actor.is_operator:
        raise PermissionDenied("Only market operators can change privacy budget limits.")
    limit = _clean_limit(epsilon_limit)
    refusal = None
    with transaction.atomic():
        budget = (
            PrivacyBudget.objects.select_for_update(of=("self",))
            .select_related("organisation", "federation")
            .filter(id=budget_id)
            .first()
        )
        if budget is None:
            raise NotFound(f"There is no privacy budget #{budget_id}.")
        previous = budget.epsilon_limit
        details = {
            "federation": budget.federation.slug,
            "organisation": budget.organisation.name,
            "previous_limit": str(previous),
            "requested_limit": str(limit),
            "reason": reason,
        }
        if limit < budget.spent + budget.reserved:
            refusal = Conflict(
                f"{budget.organisation.name} has already spent and reserved ε = "
                f"{budget.spent + budget.reserved} in '{budget.federation.slug}'; the limit cannot go "
                f"below that (you asked for {limit})."
            )
        else:
            budget.epsilon_limit = limit
            budget_entry_write(
                budget,
                BudgetAmounts(budget.spent, budget.reserved, budget.composition_rule),
                kind=EntryKind.ADJUST,
                epsilon=limit - previous,
                cost=None,
                actor=actor,
                reason=reason,
                parameters={"previous_limit": str(previous), "epsilon_limit": str(limit)},
            )
            audit_record(
                action="budget.limit_changed",
                actor=actor,
                organisation=budget.organisation,
                target=budget,
                request=request,
                details=details,
            )
    if refusal is not None:
        audit_record(
            action="budget.limit_changed",
            outcome=AuditOutcome.REFUSED,
            actor=actor,
            organisation=budget.organisation,
            target=budget,
            request=request,
            details={**details, "message": str(refusal)},
        )
        raise refusal
    return budget
