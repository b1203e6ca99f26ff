"""Silos' budgets as a price or a calibration sees them: reads only, nothing is reserved.

What a spend costs each silo is its spender's business (an L1 job's: :mod:`market.jobs.privacy_costs`); this module
puts those costs against the silos' budgets, composed exactly as a reservation would compose them.
"""

from collections.abc import Mapping

from market.budgets.ledger import LedgerState, budget_amounts, budgets_ensure, ledger_state
from market.budgets.models import PrivacyBudget
from market.errors import InvalidInput
from market.federations.models import Federation
from workers.privacy.costs import BudgetView, PrivacyCost


def budget_views(
    *, federation: Federation, organisation_ids
) -> list[tuple[PrivacyBudget, LedgerState]]:
    """Each listed silo's budget (created if missing) and its replayed ledger, in budget id order; InvalidInput
    when one is not a member."""
    budgets_ensure(federation=federation, organisation_ids=organisation_ids)
    budgets = (
        PrivacyBudget.objects.select_related("organisation")
        .filter(federation=federation, organisation_id__in=list(organisation_ids))
        .order_by("id")
    )
    found = [(budget, ledger_state(budget)) for budget in budgets]
    if len(found) != len(set(organisation_ids)):
        raise InvalidInput(f"Every silo priced must be a member of '{federation.slug}'.")
    return found


def budget_calibration_views(
    *, federation: Federation, vote_shifts: Mapping[int, int]
) -> list[BudgetView]:
    """What a calibration fits into (:class:`workers.privacy.costs.BudgetView`): each silo's limit, δ, committed
    costs and the votes its data moves (``vote_shifts``: organisation id → votes)."""
    return [
        BudgetView(
            epsilon_limit=float(budget.epsilon_limit),
            delta=float(budget.delta),
            committed=tuple(state.committed()),
            vote_shift=vote_shifts[budget.organisation_id],
        )
        for budget, state in budget_views(
            federation=federation, organisation_ids=sorted(vote_shifts)
        )
    ]


def budget_quote(*, federation: Federation, costs: Mapping[int, PrivacyCost]) -> list[dict]:
    """Per silo (organisation id → its cost), what the spend would need on top of its budget and whether it fits:
    ``[{organisation_id, organisation, budget_id, vote_shift, epsilon (its own cost on its own), epsilon_limit,
    spent, reserved, remaining, needed, remaining_after, fits, composition_rule}]``, amounts as decimal strings."""
    silos = []
    for budget, state in budget_views(federation=federation, organisation_ids=sorted(costs)):
        cost = costs[budget.organisation_id]
        amounts = budget_amounts(
            budget=budget,
            charged=state.charged,
            reserved=[*(c for c, _ in state.open_reservations.values()), cost],
        )
        needed = amounts.committed - budget.spent - budget.reserved
        silos.append(
            {
                "organisation_id": budget.organisation_id,
                "organisation": budget.organisation.name,
                "budget_id": budget.id,
                "vote_shift": cost.report.vote_shift,
                "epsilon": cost.report.epsilon,
                "epsilon_limit": str(budget.epsilon_limit),
                "spent": str(budget.spent),
                "reserved": str(budget.reserved),
                "remaining": str(budget.remaining),
                "needed": str(needed),
                "remaining_after": str(budget.remaining - needed),
                "fits": amounts.committed <= budget.epsilon_limit,
                "composition_rule": amounts.rule,
            }
        )
    return silos
