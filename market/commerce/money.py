"""The market's money as the operator reads it: the fees the market kept, and every organisation's wallet with its
ledger (top-ups, purchases, revenue shares, payouts), searchable. Reads only; the writes are in
market.commerce.wallets, market.commerce.purchases and market.commerce.payouts."""

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from market.accounts.models import Organisation, User
from market.commerce.models import Purchase, UsageCharge, Wallet, WalletEntry, WalletEntryKind
from market.commerce.services import require_operator


@dataclass(frozen=True)
class MarketFees:
    """The market wallet's fees: the total kept (from sales and from metered use), from how many sales, out of how
    much sold; and the metered use of predictions-only purchases: calls, what they charged, the fees kept (cents)."""

    total_fee_cents: int
    sales: int
    total_sold_cents: int
    balance_cents: int
    usage_calls: int = 0
    usage_revenue_cents: int = 0
    usage_fee_cents: int = 0


def market_fees(*, user: User) -> MarketFees:
    require_operator(user, "read the market's money")
    sold = Purchase.objects.aggregate(
        sales=Count("id"),
        sold=Coalesce(Sum("price_cents"), Value(0)),
        fees=Coalesce(Sum("fee_cents"), Value(0)),
    )
    used = UsageCharge.objects.aggregate(
        calls=Count("id"),
        charged=Coalesce(Sum("amount_cents"), Value(0)),
        fees=Coalesce(Sum("fee_cents"), Value(0)),
    )
    market_wallet = Wallet.objects.filter(is_market=True).first()
    return MarketFees(
        total_fee_cents=sold["fees"] + used["fees"],
        sales=sold["sales"],
        total_sold_cents=sold["sold"],
        balance_cents=market_wallet.balance_cents if market_wallet else 0,
        usage_calls=used["calls"],
        usage_revenue_cents=used["charged"],
        usage_fee_cents=used["fees"],
    )


def sales_with_fees(*, user: User) -> QuerySet[Purchase]:
    """Every sale, newest first, with its listing and buyer (price, fee and fee percentage on the row)."""
    require_operator(user, "read the market's money")
    return Purchase.objects.select_related("listing", "buyer_organisation").order_by(
        "-created_at", "-id"
    )


def _kind_total(kind: str):
    return Coalesce(
        Sum("wallet__entries__amount_cents", filter=Q(wallet__entries__kind=kind)), Value(0)
    )


def organisations_with_money(*, user: User, search: str = "") -> QuerySet[Organisation]:
    """Organisations by name (those whose name contains ``search``), each annotated with its balance and the
    totals of its ledger in cents: ``topped_up``, ``spent`` (negative), ``spent_on_use`` (negative: metered
    predictions), ``earned`` and ``paid_out`` (negative)."""
    require_operator(user, "read the market's money")
    organisations = Organisation.objects.all()
    if search.strip():
        organisations = organisations.filter(name__icontains=search.strip())
    return organisations.annotate(
        balance=Coalesce("wallet__balance_cents", Value(0)),
        topped_up=_kind_total(WalletEntryKind.TOP_UP),
        spent=_kind_total(WalletEntryKind.PURCHASE_DEBIT),
        spent_on_use=_kind_total(WalletEntryKind.USAGE_DEBIT),
        earned=_kind_total(WalletEntryKind.REVENUE_CREDIT),
        paid_out=_kind_total(WalletEntryKind.PAYOUT),
    ).order_by("name", "id")


def ledger_entries(
    *, user: User, organisation: Organisation, kind: str = "", search: str = ""
) -> QuerySet[WalletEntry]:
    """One organisation's ledger, newest first: only entries of ``kind`` when given, and only those whose
    reference, note or listing name contains ``search``."""
    require_operator(user, "read the market's money")
    entries = WalletEntry.objects.filter(wallet__organisation=organisation).select_related(
        "purchase__listing", "created_by"
    )
    if kind in WalletEntryKind.values:
        entries = entries.filter(kind=kind)
    if search.strip():
        text = search.strip()
        entries = entries.filter(
            Q(reference__icontains=text)
            | Q(note__icontains=text)
            | Q(purchase__listing__name__icontains=text)
        )
    return entries.order_by("-id")


def payouts_of(*, organisation: Organisation) -> QuerySet[WalletEntry]:
    """The payouts recorded to an organisation, newest first (its own earnings page shows them)."""
    return WalletEntry.objects.filter(
        wallet__organisation=organisation, kind=WalletEntryKind.PAYOUT
    ).order_by("-id")
