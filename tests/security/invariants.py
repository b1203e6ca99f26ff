"""Market-wide invariants, checked after every database test (tests/conftest.py ``market_invariants``).

Each check reads the database the test leaves behind (before pytest-django rolls it back or flushes it)
and returns sentences describing violations.
"""

from django.db.models import F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone


def wallet_violations() -> list[str]:
    """Every wallet's balance equals the sum of its ledger, its last entry's running balance, and is ≥ 0."""
    from market.commerce.models import Wallet, WalletEntry

    last_balance = (
        WalletEntry.objects.filter(wallet=OuterRef("pk"))
        .order_by("-id")
        .values("balance_after_cents")[:1]
    )
    wallets = Wallet.objects.annotate(
        ledger=Coalesce(Sum("entries__amount_cents"), 0), last_balance=Subquery(last_balance)
    )
    problems = [
        f"wallet #{row.id} holds {row.balance_cents} cents but its ledger sums to {row.ledger}"
        for row in wallets.exclude(balance_cents=F("ledger"))
    ]
    problems += [
        f"wallet #{row.id} holds {row.balance_cents} cents but its last entry says {row.last_balance}"
        for row in wallets.filter(last_balance__isnull=False).exclude(
            balance_cents=F("last_balance")
        )
    ]
    problems += [
        f"wallet #{row.id} is negative: {row.balance_cents} cents"
        for row in Wallet.objects.filter(balance_cents__lt=0)
    ]
    return problems


def budget_violations() -> list[str]:
    """Spent plus reserved never exceeds the limit, neither is negative, and the row matches its last ledger line."""
    from market.budgets.models import BudgetEntry, PrivacyBudget

    problems = [
        f"budget #{row.id} spent {row.spent} + reserved {row.reserved} exceeds its limit {row.epsilon_limit}"
        for row in PrivacyBudget.objects.filter(
            Q(spent__gt=F("epsilon_limit") - F("reserved")) | Q(spent__lt=0) | Q(reserved__lt=0)
        )
    ]
    last = BudgetEntry.objects.filter(budget=OuterRef("pk")).order_by("-id")
    rows = PrivacyBudget.objects.annotate(
        last_spent=Subquery(last.values("spent_after")[:1]),
        last_reserved=Subquery(last.values("reserved_after")[:1]),
        last_limit=Subquery(last.values("epsilon_limit_after")[:1]),
    )
    for row in rows.filter(last_spent__isnull=False):
        if (row.spent, row.reserved, row.epsilon_limit) != (
            row.last_spent,
            row.last_reserved,
            row.last_limit,
        ):
            problems.append(
                f"budget #{row.id} reads spent {row.spent}, reserved {row.reserved}, limit "
                f"{row.epsilon_limit} but its last ledger line says {row.last_spent}, "
                f"{row.last_reserved}, {row.last_limit}"
            )
    return problems


def job_violations() -> list[str]:
    """No job is running without a live lease (a worker holding it until a time still to come)."""
    from market.jobs.models import Job

    stale = Job.objects.filter(status="running").filter(
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=timezone.now())
    )
    return [
        f"job #{row.id} is running without a live lease (lease expires {row.lease_expires_at})"
        for row in stale
    ]


def audit_violations() -> list[str]:
    from market.audit.selectors import audit_chain_verify

    verdict = audit_chain_verify()
    return [] if verdict.ok else [f"the audit chain is broken: {verdict.problem}"]


def invariant_violations(*, skip: frozenset = frozenset()) -> list[str]:
    checks = {
        "wallets": wallet_violations,
        "budgets": budget_violations,
        "jobs": job_violations,
        "audit": audit_violations,
    }
    return [problem for name, check in checks.items() if name not in skip for problem in check()]
