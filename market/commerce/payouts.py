"""Silo payouts: the market pays a silo its earnings outside the app (a bank transfer) and the operator records
the payment here, by its reference, as a ledger entry that takes the amount out of the silo's wallet.

A silo can be paid at most what it earned (its revenue shares less its earlier payouts) and at most what its
wallet holds (credits it spent on purchases are no longer there to pay). Recording the same payment reference
again returns the first entry and changes nothing, so a resubmitted form or a retried API call never pays twice.
"""

from django.db.models import Sum

from market.accounts.models import Organisation, User
from market.audit.services import audit_record
from market.commerce.models import Wallet, WalletEntry, WalletEntryKind
from market.commerce.services import MAX_PRICE_CENTS, require_operator
from market.commerce.wallets import wallet_entry_append, wallet_entry_once
from market.errors import Conflict, InvalidInput


def payable_cents(*, organisation: Organisation) -> int:
    """What the market still owes the organisation: its revenue shares less its payouts, at most its balance."""
    wallet = Wallet.objects.filter(organisation=organisation).first()
    if wallet is None:
        return 0
    totals = {
        row["kind"]: row["total"]
        for row in WalletEntry.objects.filter(
            wallet=wallet, kind__in=[WalletEntryKind.REVENUE_CREDIT, WalletEntryKind.PAYOUT]
        )
        .values("kind")
        .annotate(total=Sum("amount_cents"))
    }
    earned = totals.get(WalletEntryKind.REVENUE_CREDIT, 0) + totals.get(WalletEntryKind.PAYOUT, 0)
    return max(0, min(earned, wallet.balance_cents))


def payout_record(
    *,
    organisation: Organisation,
    amount_cents: int,
    reference: str,
    actor: User,
    note: str = "",
    request=None,
) -> tuple[WalletEntry, bool]:
    """Record a payout of ``amount_cents`` to ``organisation`` made outside the app under the payment
    ``reference``; returns the entry and whether it was new (``False``: that reference was already recorded)."""
    require_operator(actor, "record payouts")
    reference = reference.strip()
    if not reference:
        raise InvalidInput(
            "Give the payment's reference (the bank transfer's), so that a payout is never recorded twice.",
            field="reference",
        )
    if not 0 < amount_cents <= MAX_PRICE_CENTS:
        raise InvalidInput(
            f"A payout must be between 0.01 and {MAX_PRICE_CENTS // 100} credits, "
            f"not {amount_cents / 100:.2f}.",
            field="amount",
        )
    return wallet_entry_once(
        organisation=organisation,
        kind=WalletEntryKind.PAYOUT,
        amount_cents=-amount_cents,
        reference=reference,
        append=lambda wallet: _payout_append(
            wallet=wallet,
            organisation=organisation,
            amount_cents=amount_cents,
            reference=reference,
            note=note.strip()[:500],
            actor=actor,
            request=request,
        ),
        used_for="another ledger entry",
    )


def _payout_append(
    *,
    wallet: Wallet,
    organisation: Organisation,
    amount_cents: int,
    reference: str,
    note: str,
    actor: User,
    request,
) -> WalletEntry:
    owed = payable_cents(organisation=organisation)
    if amount_cents > owed:
        raise Conflict(
            f"{organisation.name} can be paid at most {owed / 100:.2f} credits (its earnings not yet paid "
            f"out, within its balance), not {amount_cents / 100:.2f}."
        )
    entry = wallet_entry_append(
        wallet=wallet,
        kind=WalletEntryKind.PAYOUT,
        amount_cents=-amount_cents,
        reference=reference,
        note=note,
        actor=actor,
    )
    audit_record(
        action="wallet.payout_recorded",
        actor=actor,
        organisation=organisation,
        target=entry,
        request=request,
        details={"amount_cents": amount_cents, "reference": reference},
    )
    return entry
