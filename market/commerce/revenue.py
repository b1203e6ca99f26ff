"""How the price of a sale is split, to the cent (the rule is documented in docs/market.md).

1. The market fee is ``floor(price × fee_percent / 100)`` cents.
2. The rest is shared among the contributing silos in proportion to the global model's contribution
   weights by the largest-remainder method: each silo first gets the whole cents of its exact share;
   the cents left over (fewer than the number of silos) go one each to the silos with the largest
   fractional parts, ties going to the lower organisation id.

So the fee and the shares always add up to the price exactly, no silo gets more than one cent above its exact
share, and the same sale always splits the same way.
"""

from decimal import Decimal
from fractions import Fraction
from math import floor


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
