"""Credits into wallets: a wallet per organisation (and one for the market's fees), its append-only ledger, an
operator's top-up, and a buyer's credit request that an operator approves once the payment arrived.

Every change of a balance happens under a row lock on the wallets involved (taken in id order, so two
purchases never deadlock), with its ledger entry in the same transaction. A top-up is keyed by its payment
reference, unique over the ledger, so a payment is credited once however often it is posted.
"""

from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.services import audit_record
from market.commerce.models import (
    CreditRequest,
    CreditRequestStatus,
    Purchase,
    UsageCharge,
    Wallet,
    WalletEntry,
    WalletEntryKind,
)
from market.commerce.services import MAX_PRICE_CENTS, require_operator
from market.errors import Conflict, InvalidInput, PermissionDenied


def wallet_ensure(*, organisation: Organisation | None) -> Wallet:
    """The organisation's wallet (the market's for None), created on first use."""
    if organisation is None:
        wallet, _ = Wallet.objects.get_or_create(is_market=True, organisation=None)
    else:
        wallet, _ = Wallet.objects.get_or_create(
            organisation=organisation, defaults={"is_market": False}
        )
    return wallet


def wallets_locked(wallet_ids: set[int]) -> dict[int, Wallet]:
    """Row locks on the wallets, always taken in id order so that concurrent purchases cannot deadlock."""
    return {
        wallet.id: wallet
        for wallet in Wallet.objects.select_for_update().filter(id__in=wallet_ids).order_by("id")
    }


def wallet_entry_append(
    *,
    wallet: Wallet,
    kind: str,
    amount_cents: int,
    purchase: Purchase | None = None,
    usage_charge: UsageCharge | None = None,
    reference: str = "",
    note: str = "",
    actor: User | None = None,
) -> WalletEntry:
    """Move ``amount_cents`` into (or, negative, out of) a locked wallet, with its ledger entry."""
    wallet.balance_cents += amount_cents
    wallet.save(update_fields=["balance_cents", "updated_at"])
    return WalletEntry.objects.create(
        wallet=wallet,
        kind=kind,
        amount_cents=amount_cents,
        balance_after_cents=wallet.balance_cents,
        purchase=purchase,
        usage_charge=usage_charge,
        reference=reference,
        note=note,
        created_by=actor,
    )


def wallet_top_up(
    *,
    organisation: Organisation,
    amount_cents: int,
    reference: str,
    actor: User,
    note: str = "",
    request=None,
) -> tuple[WalletEntry, bool]:
    """Credit an organisation's wallet once per payment ``reference``: posting the same top-up again (as a payment
    provider's webhook may) returns the first entry and ``False``; reusing a reference for anything else is a 409."""
    require_operator(actor, "top up wallets")
    reference = reference.strip()
    if not reference:
        raise InvalidInput(
            "Give the payment's reference, so that the same top-up is never credited twice."
        )
    if amount_cents <= 0 or amount_cents > MAX_PRICE_CENTS:
        raise InvalidInput(
            f"A top-up must be between 1 and {MAX_PRICE_CENTS} cents, not {amount_cents}."
        )

    def credit(wallet: Wallet) -> WalletEntry:
        entry = wallet_entry_append(
            wallet=wallet,
            kind=WalletEntryKind.TOP_UP,
            amount_cents=amount_cents,
            reference=reference,
            note=note,
            actor=actor,
        )
        audit_record(
            action="wallet.topped_up",
            actor=actor,
            organisation=organisation,
            target=entry,
            request=request,
            details={"amount_cents": amount_cents, "reference": reference},
        )
        return entry

    return wallet_entry_once(
        organisation=organisation,
        kind=WalletEntryKind.TOP_UP,
        amount_cents=amount_cents,
        reference=reference,
        append=credit,
        used_for="another top-up",
    )


def wallet_entry_once(
    *,
    organisation: Organisation,
    kind: str,
    amount_cents: int,
    reference: str,
    append: Callable[[Wallet], WalletEntry],
    used_for: str,
) -> tuple[WalletEntry, bool]:
    """The one ledger entry of a payment ``reference``: ``append(locked wallet)`` writes it the first time (and
    ``True``); posting the same entry again (kind, wallet and signed ``amount_cents``), also at the same moment as a
    first post, returns the first and ``False``; a reference that belongs to another entry is a 409 naming
    ``used_for``."""
    wallet_id = wallet_ensure(organisation=organisation).id

    def replay(existing: WalletEntry) -> WalletEntry:
        if (existing.kind, existing.wallet_id, existing.amount_cents) != (
            kind,
            wallet_id,
            amount_cents,
        ):
            raise Conflict(
                f"The payment reference {existing.reference!r} was already used for {used_for}; "
                "each payment has its own reference."
            )
        return existing

    try:
        with transaction.atomic():
            wallet = wallets_locked({wallet_id})[wallet_id]
            existing = WalletEntry.objects.filter(reference=reference).first()
            if existing is not None:
                return replay(existing), False
            return append(wallet), True
    # The same reference posted at the same moment (to this wallet or another): the unique index refused ours.
    except IntegrityError:
        existing = WalletEntry.objects.filter(reference=reference).first()
        if existing is None:
            raise
        return replay(existing), False


# --- credit requests (a buyer's "add credits"; an operator approves once paid) ---


def credit_request_require_wallet(user: User) -> None:
    if user.organisation_id is None:
        raise PermissionDenied("Only members of an organisation have a wallet to add credits to.")


def credit_request_create(
    *, user: User, amount_cents: int, note: str = "", request=None
) -> CreditRequest:
    """A pending request for ``amount_cents`` credits for the user's organisation; nothing is credited yet."""
    credit_request_require_wallet(user)
    if not 0 < amount_cents <= MAX_PRICE_CENTS:
        raise InvalidInput(
            f"Ask for between 0.01 and {MAX_PRICE_CENTS // 100} credits, not {amount_cents / 100:.2f}."
        )
    if len(note) > 500:
        raise InvalidInput(f"The note must be at most 500 characters, not {len(note)}.")
    with transaction.atomic():
        credit_request = CreditRequest.objects.create(
            organisation=user.organisation,
            requested_by=user,
            amount_cents=amount_cents,
            note=note.strip(),
        )
        audit_record(
            action="wallet.credit_requested",
            actor=user,
            target=credit_request,
            request=request,
            details={"amount_cents": amount_cents},
        )
    return credit_request


def _pending_locked(credit_request: CreditRequest) -> CreditRequest:
    locked = CreditRequest.objects.select_for_update().get(pk=credit_request.pk)
    if locked.status != CreditRequestStatus.PENDING:
        raise Conflict(
            f"Credit request #{locked.pk} was already {locked.get_status_display().lower()}."
        )
    return locked


def credit_request_approve(
    *, credit_request: CreditRequest, actor: User, payment_reference: str, request=None
) -> CreditRequest:
    """Credit the wallet (the request is the top-up's reference, so it is credited once) and mark it approved,
    recording the reference of the payment the operator received."""
    require_operator(actor, "approve credit requests")
    payment_reference = payment_reference.strip()
    if not payment_reference or len(payment_reference) > 200:
        raise InvalidInput(
            "Give the reference of the payment you received (1 to 200 characters), e.g. the bank "
            "transfer's reference or the invoice number."
        )
    with transaction.atomic():
        locked = _pending_locked(credit_request)
        entry, _ = wallet_top_up(
            organisation=locked.organisation,
            amount_cents=locked.amount_cents,
            actor=actor,
            reference=f"credit-request-{locked.pk}",
            note=f"Payment {payment_reference}. {locked.note}".strip()[:500],
            request=request,
        )
        locked.status, locked.decided_by, locked.decided_at, locked.top_up = (
            CreditRequestStatus.APPROVED,
            actor,
            timezone.now(),
            entry,
        )
        locked.payment_reference = payment_reference
        locked.save(
            update_fields=["status", "decided_by", "decided_at", "top_up", "payment_reference"]
        )
        audit_record(
            action="wallet.credit_request_approved",
            actor=actor,
            organisation=locked.organisation,
            target=locked,
            request=request,
            details={"amount_cents": locked.amount_cents, "payment_reference": payment_reference},
        )
    return locked


def credit_request_decline(
    *, credit_request: CreditRequest, actor: User, request=None
) -> CreditRequest:
    require_operator(actor, "decline credit requests")
    with transaction.atomic():
        locked = _pending_locked(credit_request)
        locked.status, locked.decided_by, locked.decided_at = (
            CreditRequestStatus.DECLINED,
            actor,
            timezone.now(),
        )
        locked.save(update_fields=["status", "decided_by", "decided_at"])
        audit_record(
            action="wallet.credit_request_declined",
            actor=actor,
            organisation=locked.organisation,
            target=locked,
            request=request,
            details={"amount_cents": locked.amount_cents},
        )
    return locked
