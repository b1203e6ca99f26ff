"""How the price of a sale is split, to the cent (the rule is documented in docs/market.md).

1. The market fee is ``floor(price × fee_percent / 100)`` cents.
2. The rest is shared among the contributing silos in proportion to weights chosen by the federation's revenue
   split policy (:func:`split_basis`) by the largest-remainder method: each silo first gets the whole cents of its exact share;
   the cents left over (fewer than the number of silos) go one each to the silos with the largest
   fractional parts, ties going to the lower organisation id.

So the fee and the shares always add up to the price exactly, no silo gets more than one cent above its exact
share, and the same sale always splits the same way.

The policies (``Federation.revenue_split``):

- ``agreement`` (the split before issue 28): the global model's contribution weights, each silo's share of the
  public labels where its members agreed with the fused label;
- ``value``: each silo's contribution value (its Shapley value of the job's own vote or average, balanced accuracy:
  ``GlobalModel.contribution_values``); a silo with a value ≤ 0 is paid nothing, the rest in proportion. It applies
  only where a silo may see its own value (``values_released``: L0 models, market.jobs.visibility): elsewhere the
  values are kept to the operator (docs/budgets.md), and a payout in proportion to them would tell each silo its
  own value, so such a model, and a model without values (a kind with no vote or average, or a model made before
  values) or with no positive value, is split by ``agreement`` instead, and its ledger entries say so;
- ``agreement`` likewise applies only where a silo may see its own contribution weight (``shares_released``: not at
  L1 unless the federation publishes contributions); elsewhere the sale is split ``equal`` and the entries say why;
- ``equal``: every silo that took part (every organisation in the contribution weights) the same.

Under every policy, a model whose contribution weights are all 0 used no silo's upload (``vote: auto`` chose the
model fitted on the operator's rows alone, issue 39): no silo is paid and the market keeps the price.
"""

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from math import floor

AGREEMENT, VALUE, EQUAL = "agreement", "value", "equal"
#: Why no silo is paid for a model whose every contribution weight is 0 (it used no silo's upload).
NO_SILO_USED = "the global model used no silo's upload: every contribution weight is 0"
VALUE_MEASURE = "balanced_accuracy"


@dataclass(frozen=True)
class SplitBasis:
    """What a sale is split by: the policy asked for, the policy applied, why they differ, each silo's weight
    and the sentence its ledger entry carries (naming the policy and the value used)."""

    policy: str
    applied: str
    reason: str
    weights: dict[str, float]
    notes: dict[str, str]


def split_basis(
    *,
    policy: str,
    contribution_weights: dict,
    contribution_values: dict,
    privacy_level: str,
    values_released: bool,
    shares_released: bool,
) -> SplitBasis:
    """The weights of ``policy`` for one global model (module docstring), with each silo's ledger note.

    ``values_released`` / ``shares_released``: whether each silo may learn its own contribution value / weight
    (market.jobs.visibility's ``silo_value_visible`` / ``silo_share_visible``)."""
    reason = ""
    applied = policy
    if contribution_weights and not any(weight > 0 for weight in contribution_weights.values()):
        # every weight 0: the global model used no silo's upload (vote auto chose the operator's rows alone)
        return SplitBasis(policy=policy, applied=policy, reason=NO_SILO_USED, weights={}, notes={})
    if policy == VALUE:
        silos = (contribution_values or {}).get("silos") or {}
        values = {
            key: float((silo.get("shapley") or {}).get(VALUE_MEASURE) or 0.0)
            for key, silo in silos.items()
        }
        if not values_released:
            reason = f"an {privacy_level} model's values are kept to the operator"
        elif not values:
            reason = "the model has no contribution values"
        elif not any(value > 0 for value in values.values()):
            reason = "no silo has a positive contribution value"
        if reason:
            applied = AGREEMENT
        else:
            weights = {key: max(value, 0.0) for key, value in values.items()}
            estimator = contribution_values.get("estimator", "exact")
            return SplitBasis(
                policy=policy,
                applied=VALUE,
                reason="",
                weights=weights,
                notes={
                    key: f"Revenue split by contribution value: {estimator} Shapley value "
                    f"({VALUE_MEASURE.replace('_', ' ')}) {values[key]:.6f}"
                    + ("" if weights[key] > 0 else ", not positive: paid nothing")
                    for key in weights
                },
            )
    if applied == AGREEMENT and not shares_released:
        applied = EQUAL
        reason = (f"{reason}; " if reason else "") + (
            f"an {privacy_level} model's agreement shares come from the silos' un-noised votes, "
            "which the federation does not publish"
        )
    if applied == EQUAL:
        weights = {key: 1.0 for key in contribution_weights}
        fallback = f" (policy {policy} not applied: {reason})" if reason else ""
        return SplitBasis(
            policy=policy,
            applied=EQUAL,
            reason=reason,
            weights=weights,
            notes={
                key: f"Revenue split equally: 1 of {len(weights)} silos{fallback}"
                for key in weights
            },
        )
    weights = {key: float(weight) for key, weight in contribution_weights.items()}
    fallback = f" (policy value not applied: {reason})" if reason else ""
    return SplitBasis(
        policy=policy,
        applied=AGREEMENT,
        reason=reason,
        weights=weights,
        notes={
            key: f"Revenue split by agreement: contribution weight {weight:.6f}{fallback}"
            for key, weight in weights.items()
        },
    )


def market_fee_cents(*, price_cents: int, fee_percent: int) -> int:
    return price_cents * fee_percent // 100


def revenue_shares(*, amount_cents: int, weights: dict[str, float]) -> dict[str, int]:
    """``amount_cents`` split by ``weights`` ({"<organisation id>": weight ≥ 0}) with the largest-remainder method.

    Weights need not sum to one; silos with weight 0 get nothing and are left out. With no positive weight the
    result is empty (the caller keeps the amount).
    """
    exact_weights = {
        key: Fraction(Decimal(str(weight))) for key, weight in weights.items() if weight > 0
    }
    total = sum(exact_weights.values())
    if not exact_weights or amount_cents == 0:
        return {}
    quotas = {key: amount_cents * weight / total for key, weight in exact_weights.items()}
    shares = {key: floor(quota) for key, quota in quotas.items()}
    left_over = amount_cents - sum(shares.values())
    by_remainder = sorted(
        quotas, key=lambda key: (-(quotas[key] - shares[key]), _organisation_order(key))
    )
    for key in by_remainder[:left_over]:
        shares[key] += 1
    return shares


def _organisation_order(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (2**63, key)
