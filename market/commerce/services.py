"""Writes of the market: listings, wallet top-ups, credit requests and purchases.

Every change of a balance happens under a row lock on the wallets involved (taken in id order, so two
purchases never deadlock), with its append-only ledger entry in the same transaction.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.commerce.catalog_cache import catalog_changed
from market.commerce.models import (
    CreditRequest,
    CreditRequestStatus,
    Entitlement,
    IdempotencyKey,
    Listing,
    ListingStatus,
    Purchase,
    Wallet,
    WalletEntry,
    WalletEntryKind,
)
from market.commerce.packages import raw_column_members
from market.commerce.quality import QualityVerdict, quality_verdict
from market.commerce.revenue import SplitBasis, market_fee_cents, revenue_shares, split_basis
from market.errors import (
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from market.jobs.models import GlobalModel
from market.jobs.visibility import model_privacy_level, silo_share_visible, silo_value_visible

MAX_PRICE_CENTS = 10**12


@dataclass(frozen=True)
class PurchaseResult:
    purchase: Purchase
    replayed: bool  # True when an earlier request with the same Idempotency-Key made this purchase


def require_operator(user: User, action: str) -> None:
    if not user.is_operator:
        raise PermissionDenied(f"Only market operators can {action}.")


# --- listings ---


def _check_listing_terms(*, name: str, licence_text: str, price_cents: int) -> None:
    if not name.strip():
        raise InvalidInput("Give the listing a name.")
    if not licence_text.strip():
        raise InvalidInput("Give the licence text under which buyers may use the model.")
    if not 0 <= price_cents <= MAX_PRICE_CENTS:
        raise InvalidInput(
            f"The price must be between 0 and {MAX_PRICE_CENTS} cents, not {price_cents}."
        )


@transaction.atomic
def listing_create(
    *,
    global_model: GlobalModel,
    name: str,
    description: str,
    licence_text: str,
    price_cents: int,
    actor: User,
    previous_version: Listing | None = None,
    request=None,
) -> Listing:
    """A draft listing of ``global_model``; its model family, privacy level and metrics are copied from it."""
    require_operator(actor, "create listings")
    _check_listing_terms(name=name, licence_text=licence_text, price_cents=price_cents)
    if not global_model.files.exists():
        raise InvalidInput(f"Global model #{global_model.id} has no files to sell yet.")
    if (
        previous_version is not None
        and previous_version.federation_id != global_model.federation_id
    ):
        raise InvalidInput(
            "A new version must sell a model of the same federation as the listing it replaces."
        )
    metrics = global_model.metrics or {}
    listing = Listing.objects.create(
        global_model=global_model,
        federation_id=global_model.federation_id,
        name=name.strip(),
        description=description,
        licence_text=licence_text,
        price_cents=price_cents,
        previous_version=previous_version,
        model_family=global_model.model_family,
        privacy_level=global_model.job.privacy_level,
        created_by=actor,
        **{
            metric: metrics.get(metric)
            for metric in ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")
        },
    )
    catalog_changed()
    audit_record(
        action="listing.created",
        actor=actor,
        target=listing,
        request=request,
        details={"global_model": global_model.id, "price_cents": price_cents},
    )
    return listing


class PublishGateRefused(Conflict):
    """The model does not beat the majority-class guess by the publish margin and no override reason was given."""


MAX_OVERRIDE_REASON = 2000


def listing_publish(
    *, listing: Listing, actor: User, override_reason: str = "", request=None
) -> Listing:
    """Draft → published; a published previous version is retired at the same moment.

    The publish gate (market.commerce.quality) refuses a model that does not beat the majority-class guess by
    five points of balanced accuracy, unless ``override_reason`` says why it is sold anyway: the reason is kept
    on the listing, shown on its card, and audited. A reason given for a model that passes is not recorded.
    """
    require_operator(actor, "publish listings")
    if listing.status != ListingStatus.DRAFT:
        raise _not_a_draft(listing)
    verdict = quality_verdict(listing.global_model)
    override_reason = override_reason.strip() if not verdict.passes_gate else ""
    if len(override_reason) > MAX_OVERRIDE_REASON:
        raise InvalidInput(
            f"The override reason must be at most {MAX_OVERRIDE_REASON} characters, "
            f"not {len(override_reason)}."
        )
    _require_runnable_from_its_package(listing.global_model)
    if not verdict.passes_gate and not override_reason:
        refusal = verdict.refusal()
        audit_record(
            action="listing.published",
            outcome=AuditOutcome.REFUSED,
            actor=actor,
            target=listing,
            request=request,
            details={"reason": refusal},
        )
        raise PublishGateRefused(refusal)
    return _publish_in_transaction(
        listing=listing,
        actor=actor,
        verdict=verdict,
        override_reason=override_reason,
        request=request,
    )


def _require_runnable_from_its_package(global_model: GlobalModel) -> None:
    """A buyer runs what it buys with onnxruntime and numpy alone: a model with a member that runs only with its own
    library (an ensemble member whose ONNX conversion did not predict like it) is not sold."""
    try:
        raw_column_members(global_model)
    except InvalidInput as error:
        raise Conflict(
            f"{error} A buyer must be able to run what it buys with onnxruntime and numpy alone, so this model "
            "cannot be sold; launch the ensemble without that member."
        ) from error


def _not_a_draft(listing: Listing) -> Conflict:
    return Conflict(
        f"Listing #{listing.pk} is not a draft; only drafts can be published. "
        "To change what a published listing sells, create a new version."
    )


@transaction.atomic
def _publish_in_transaction(
    *, listing: Listing, actor: User, verdict: QualityVerdict, override_reason: str, request
) -> Listing:
    now = timezone.now()
    if not Listing.objects.filter(pk=listing.pk, status=ListingStatus.DRAFT).update(
        status=ListingStatus.PUBLISHED, published_at=now, publish_override_reason=override_reason
    ):
        raise _not_a_draft(listing)
    catalog_changed()
    if listing.previous_version_id is not None:
        Listing.objects.filter(
            pk=listing.previous_version_id, status=ListingStatus.PUBLISHED
        ).update(status=ListingStatus.RETIRED, retired_at=now)
    audit_record(
        action="listing.published",
        actor=actor,
        target=listing,
        request=request,
        details={"price_cents": listing.price_cents, "gate_overridden": bool(override_reason)},
    )
    if override_reason:
        audit_record(
            action="listing.publish_gate_overridden",
            actor=actor,
            target=listing,
            request=request,
            details={
                "reason": override_reason,
                "gate": verdict.gate_failure(),
                "balanced_accuracy": verdict.balanced_accuracy,
                "majority_class_balanced_accuracy": verdict.majority_class,
            },
        )
    listing.refresh_from_db()
    return listing


@transaction.atomic
def listing_retire(*, listing: Listing, actor: User, request=None) -> Listing:
    """No new sales; buyers keep what they bought."""
    require_operator(actor, "retire listings")
    if not Listing.objects.filter(pk=listing.pk, status=ListingStatus.PUBLISHED).update(
        status=ListingStatus.RETIRED, retired_at=timezone.now()
    ):
        raise Conflict(
            f"Listing #{listing.pk} is not on sale (it is {listing.get_status_display().lower()}); "
            "only published listings can be retired."
        )
    catalog_changed()
    audit_record(action="listing.retired", actor=actor, target=listing, request=request)
    listing.refresh_from_db()
    return listing


# --- wallets ---


def wallet_ensure(*, organisation: Organisation | None) -> Wallet:
    """The organisation's wallet (the market's for None), created on first use."""
    if organisation is None:
        wallet, _ = Wallet.objects.get_or_create(is_market=True, organisation=None)
    else:
        wallet, _ = Wallet.objects.get_or_create(
            organisation=organisation, defaults={"is_market": False}
        )
    return wallet


def _wallets_locked(wallet_ids: set[int]) -> dict[int, Wallet]:
    """Row locks on the wallets, always taken in id order so that concurrent purchases cannot deadlock."""
    return {
        wallet.id: wallet
        for wallet in Wallet.objects.select_for_update().filter(id__in=wallet_ids).order_by("id")
    }


def _append_entry(
    *,
    wallet: Wallet,
    kind: str,
    amount_cents: int,
    purchase: Purchase | None = None,
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
    wallet_id = wallet_ensure(organisation=organisation).id
    try:
        with transaction.atomic():
            wallet = _wallets_locked({wallet_id})[wallet_id]
            existing = WalletEntry.objects.filter(reference=reference).first()
            if existing is not None:
                return _top_up_replay(existing, wallet=wallet, amount_cents=amount_cents), False
            entry = _append_entry(
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
            return entry, True
    except IntegrityError:  # the same reference posted at the same moment to another wallet
        existing = WalletEntry.objects.filter(reference=reference).first()
        if existing is None:
            raise
        return _top_up_replay(
            existing, wallet=Wallet.objects.get(pk=wallet_id), amount_cents=amount_cents
        ), False


def _top_up_replay(existing: WalletEntry, *, wallet: Wallet, amount_cents: int) -> WalletEntry:
    if (
        existing.kind != WalletEntryKind.TOP_UP
        or existing.wallet_id != wallet.id
        or existing.amount_cents != amount_cents
    ):
        raise Conflict(
            f"The payment reference {existing.reference!r} was already used for another top-up; "
            "each payment has its own reference."
        )
    return existing


# --- purchases ---


def purchase_create(
    *, listing: Listing, user: User, idempotency_key: str | None = None, request=None
) -> PurchaseResult:
    """Buy a published listing for the user's organisation, in one transaction: debit the buyer, keep the market
    fee, credit each contributing silo its share (docs/market.md), grant the entitlement, audit.

    With an ``idempotency_key``, a repeated request returns the first purchase and charges nothing.
    """
    if user.organisation_id is None:
        raise PermissionDenied(
            "Only members of an organisation can buy models; operators buy nothing."
        )
    if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
        raise InvalidInput("The Idempotency-Key header must be 1 to 200 characters long.")
    try:
        result = _purchase_in_transaction(
            listing=listing, user=user, idempotency_key=idempotency_key, request=request
        )
    except DomainError as refusal:
        # The transaction rolled back; the refusal is recorded on its own.
        audit_record(
            action="purchase.created",
            outcome=AuditOutcome.REFUSED,
            actor=user,
            target=listing,
            request=request,
            details={"listing": listing.pk, "reason": str(refusal)},
        )
        raise
    return result


def _split_basis(listing: Listing) -> SplitBasis:
    """The federation's revenue split policy applied to the listing's global model (market.commerce.revenue)."""
    global_model = listing.global_model
    return split_basis(
        policy=global_model.federation.revenue_split,
        contribution_weights=global_model.contribution_weights,
        contribution_values=global_model.contribution_values,
        privacy_level=model_privacy_level(global_model),
        values_released=silo_value_visible(global_model),
        shares_released=silo_share_visible(global_model),
    )


def _involved_wallet_ids(*, listing: Listing, buyer: Organisation) -> dict:
    contributors = {
        key: weight for key, weight in _split_basis(listing).weights.items() if weight > 0
    }
    organisations = Organisation.objects.in_bulk([int(key) for key in contributors])
    return {
        "buyer": wallet_ensure(organisation=buyer).id,
        "market": wallet_ensure(organisation=None).id,
        "silos": {
            key: wallet_ensure(organisation=organisations[int(key)]).id for key in contributors
        },
    }


@transaction.atomic
def _purchase_in_transaction(
    *, listing: Listing, user: User, idempotency_key: str | None, request
) -> PurchaseResult:
    buyer = user.organisation
    listing = Listing.objects.select_related("global_model__federation").get(pk=listing.pk)
    wallet_ids = _involved_wallet_ids(listing=listing, buyer=buyer)
    wallets = _wallets_locked(
        {wallet_ids["buyer"], wallet_ids["market"], *wallet_ids["silos"].values()}
    )
    # From here on this buyer's purchases run one at a time, so what we read below stays true until commit.
    if idempotency_key is not None:
        earlier = (
            IdempotencyKey.objects.filter(organisation=buyer, key=idempotency_key)
            .select_related("purchase")
            .first()
        )
        if earlier is not None:
            if earlier.listing_id != listing.id:
                raise IdempotencyKeyReused(
                    f"The Idempotency-Key {idempotency_key!r} was already used for listing "
                    f"#{earlier.listing_id}; send a new key for a new purchase."
                )
            return PurchaseResult(purchase=earlier.purchase, replayed=True)
    _check_purchasable(
        listing=listing, buyer=buyer, balance_cents=wallets[wallet_ids["buyer"]].balance_cents
    )
    purchase = _purchase_record(listing=listing, user=user, wallets=wallets, wallet_ids=wallet_ids)
    if idempotency_key is not None:
        IdempotencyKey.objects.create(
            organisation=buyer, key=idempotency_key, listing=listing, purchase=purchase
        )
    audit_record(
        action="purchase.created",
        actor=user,
        target=purchase,
        request=request,
        details={
            "listing": listing.id,
            "global_model": listing.global_model_id,
            "price_cents": purchase.price_cents,
            "fee_cents": purchase.fee_cents,
        },
    )
    return PurchaseResult(purchase=purchase, replayed=False)


def _check_purchasable(*, listing: Listing, buyer: Organisation, balance_cents: int) -> None:
    if listing.status != ListingStatus.PUBLISHED:
        raise Conflict(
            f"Listing #{listing.id} is {listing.get_status_display().lower()}, not for sale."
        )
    owned = Entitlement.objects.filter(
        organisation=buyer, global_model_id=listing.global_model_id
    ).first()
    if owned is not None:
        raise Conflict(
            f"Your organisation already owns this model (purchase #{owned.purchase_id}); "
            "download it from your purchases."
        )
    if balance_cents < listing.price_cents:
        raise Conflict(
            f"The price is {listing.price_cents} cents but your wallet holds {balance_cents}; "
            f"top up at least {listing.price_cents - balance_cents} cents."
        )


def _purchase_record(*, listing: Listing, user: User, wallets: dict, wallet_ids: dict) -> Purchase:
    fee_percent = settings.ONEFOLD_MARKET_FEE_PERCENT
    basis = _split_basis(listing)
    shares = revenue_shares(
        amount_cents=listing.price_cents
        - market_fee_cents(price_cents=listing.price_cents, fee_percent=fee_percent),
        weights=basis.weights,
    )
    fee_cents = listing.price_cents - sum(
        shares.values()
    )  # with no contributor the market keeps everything
    purchase = Purchase.objects.create(
        listing=listing,
        global_model_id=listing.global_model_id,
        buyer_organisation=user.organisation,
        buyer=user,
        price_cents=listing.price_cents,
        fee_cents=fee_cents,
        fee_percent=fee_percent,
    )
    if listing.price_cents > 0:
        _append_entry(
            wallet=wallets[wallet_ids["buyer"]],
            kind=WalletEntryKind.PURCHASE_DEBIT,
            amount_cents=-listing.price_cents,
            purchase=purchase,
            actor=user,
        )
    if fee_cents > 0:
        _append_entry(
            wallet=wallets[wallet_ids["market"]],
            kind=WalletEntryKind.MARKET_FEE,
            amount_cents=fee_cents,
            purchase=purchase,
        )
    for key, share in sorted(shares.items()):
        if share > 0:
            _append_entry(
                wallet=wallets[wallet_ids["silos"][key]],
                kind=WalletEntryKind.REVENUE_CREDIT,
                amount_cents=share,
                purchase=purchase,
                note=basis.notes[key][:500],
            )
    Entitlement.objects.create(
        organisation=user.organisation, global_model_id=listing.global_model_id, purchase=purchase
    )
    return purchase


def listing_for_purchase(*, listing_id: int) -> Listing:
    listing = Listing.objects.filter(pk=listing_id).first()
    if listing is None:
        raise NotFound(f"There is no listing #{listing_id}.")
    return listing


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
