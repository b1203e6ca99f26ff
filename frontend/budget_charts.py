"""What the budget dashboard draws, computed on the server so that it scales to hundreds of silos.

Silos are ranked by the share of their limit they have used (spent + reserved), the strip chart draws one thin
bar per silo in percent of its own limit (a silo at 80 % of a small limit looks as full as it is), and the
timeline has one point per spender (a job, an L2 submission, an FAug generator, ...) instead of one series per silo.
"""

from statistics import median

from market.budgets.models import EntryKind
from market.budgets.selectors import WARNING_FRACTION
from market.budgets.spending import spender_named


def _percent(part, limit) -> float:
    return 100.0 if not limit else max(0.0, min(100.0, float(100 * part / limit)))


def budgets_ranked(budgets) -> list:
    """Fullest first; equal shares by silo name."""
    return sorted(budgets, key=lambda budget: (-budget.used_fraction, budget.organisation.name))


def budget_strip(budgets) -> list[dict]:
    """One bar per silo (in rank order): spent and reserved in percent of its limit, as SVG coordinates on a
    0–100 scale (drawn with presentation attributes, which the Content Security Policy allows)."""
    bars = []
    for index, budget in enumerate(budgets):
        spent = _percent(budget.spent, budget.epsilon_limit)
        reserved = min(100.0 - spent, _percent(budget.reserved, budget.epsilon_limit))
        bars.append(
            {
                "x": index,
                "name": budget.organisation.name,
                "spent_y": round(100 - spent, 3),
                "spent": round(spent, 3),
                "reserved_y": round(100 - spent - reserved, 3),
                "reserved": round(reserved, 3),
                "used_percent": round(spent + reserved),
            }
        )
    return bars


def budget_overview(budgets) -> dict:
    """The summary line: how many silos, how full the typical one is, how many are near or at their limit."""
    fractions = [budget.used_fraction for budget in budgets]
    return {
        "silos": len(fractions),
        "median_percent": round(100 * median(fractions)) if fractions else 0,
        "past_warning": sum(fraction >= WARNING_FRACTION for fraction in fractions),
        "exhausted": sum(fraction >= 1 for fraction in fractions),
        "warning_percent": round(100 * WARNING_FRACTION),
    }


def job_timeline(entries) -> list[dict]:
    """One point per job, L2 submission or DP generator (FAug), oldest first: when it first touched a budget, the largest ε it asked of
    any one silo, how many silos, and where it stands (reserved, charged or released)."""
    points: dict[tuple, dict] = {}
    for entry in entries:
        if entry.kind == EntryKind.ADJUST:
            continue
        key = (entry.spender_kind, entry.spender_id)
        label, url = spender_named(*key)
        point = points.setdefault(
            key,
            {
                "at": entry.created_at.isoformat(),
                "state": entry.kind,
                "epsilon": 0.0,
                "silos": set(),
                "label": label,
                "url": url,
            },
        )
        point["state"] = entry.kind
        point["epsilon"] = max(point["epsilon"], float(entry.epsilon))
        point["silos"].add(entry.budget_id)
    return [{**point, "silos": len(point["silos"])} for point in points.values()]
