"""Purchases: a buyer's organisation buys a published listing, in one transaction that debits the buyer, keeps the
market's fee, credits each contributing silo its revenue share (market.commerce.revenue) and grants the
entitlement; a repeated request with the same Idempotency-Key returns the first purchase and charges nothing.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from market.accounts.models import Organisation, User
from market.accounts.services import api_token_create
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.commerce.models import (
    Entitlement,
    IdempotencyKey,
    Listing,
    ListingAccess,
    ListingStatus,
    PricingPlan,
    Purchase,
    WalletEntryKind,
)
from market.commerce.plans import plan_for_purchase, plan_upfront_cents
from market.commerce.revenue import SplitBasis, market_fee_cents, revenue_shares, split_basis
from market.commerce.wallets import wallet_ensure, wallet_entry_append, wallets_locked
from market.errors import (
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from market.jobs.visibility import model_privacy_level, silo_share_visible, silo_value_visible


@dataclass(frozen=True)
class PurchaseResult:
    purchase: Purchase
    replayed: bool  # True when an earlier request with the same Idempotency-Key made this purchase
    #: A predictions-only purchase's API token key, shown once (None on a replay and for downloads).
    api_token_key: str | None = None


@dataclass(frozen=True)
class Split:
    """An amount split to the cent: the market's fee and each silo's share ({"<organisation id>": cents})."""

    fee_cents: int
    shares: dict[str, int]
    basis: SplitBasis


def purchase_create(
    *,
    listing: Listing,
    user: User,
    idempotency_key: str | None = None,
    plan_id: int | None = None,
    request=None,
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
            listing=listing,
            user=user,
            idempotency_key=idempotency_key,
            plan_id=plan_id,
            request=request,
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


def sale_split(*, listing: Listing, amount_cents: int) -> Split:
    """``amount_cents`` of a sale or a use of the listing split by the federation's policy (docs/market.md)."""
    basis = _split_basis(listing)
    shares = revenue_shares(
        amount_cents=amount_cents
        - market_fee_cents(
            price_cents=amount_cents, fee_percent=settings.ONEFOLD_MARKET_FEE_PERCENT
        ),
        weights=basis.weights,
    )
    # with no contributor the market keeps everything
    return Split(fee_cents=amount_cents - sum(shares.values()), shares=shares, basis=basis)


def split_entries_append(
    *, split: Split, wallets: dict, wallet_ids: dict, purchase: Purchase, usage_charge=None
) -> None:
    """The market's fee and the silos' shares of a split, as ledger entries into the locked wallets."""
    if split.fee_cents > 0:
        wallet_entry_append(
            wallet=wallets[wallet_ids["market"]],
            kind=WalletEntryKind.MARKET_FEE,
            amount_cents=split.fee_cents,
            purchase=purchase,
            usage_charge=usage_charge,
        )
    for key, share in sorted(split.shares.items()):
        if share > 0:
            wallet_entry_append(
                wallet=wallets[wallet_ids["silos"][key]],
                kind=WalletEntryKind.REVENUE_CREDIT,
                amount_cents=share,
                purchase=purchase,
                usage_charge=usage_charge,
                note=split.basis.notes[key][:500],
            )


def sale_wallet_ids(*, listing: Listing, buyer: Organisation) -> dict:
    """The ids of every wallet a sale or use of the listing touches: the buyer's, the market's, each silo's."""
    return _involved_wallet_ids(listing=listing, buyer=buyer)


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
    *, listing: Listing, user: User, idempotency_key: str | None, plan_id: int | None, request
) -> PurchaseResult:
    buyer = user.organisation
    listing = Listing.objects.select_related("global_model__federation").get(pk=listing.pk)
    # Every wallet the sale touches exists first, so that all of them are locked in one id-ordered query.
    wallet_ids = _involved_wallet_ids(listing=listing, buyer=buyer)
    wallets = wallets_locked(
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
    plan = plan_for_purchase(listing=listing, buyer=buyer, plan_id=plan_id)
    price_cents = plan_upfront_cents(plan) if plan is not None else listing.price_cents
    _check_purchasable(
        listing=listing,
        buyer=buyer,
        price_cents=price_cents,
        balance_cents=wallets[wallet_ids["buyer"]].balance_cents,
    )
    purchase = _purchase_record(
        listing=listing,
        user=user,
        plan=plan,
        price_cents=price_cents,
        wallets=wallets,
        wallet_ids=wallet_ids,
    )
    if idempotency_key is not None:
        IdempotencyKey.objects.create(
            organisation=buyer, key=idempotency_key, listing=listing, purchase=purchase
        )
    api_token_key = None
    if listing.access == ListingAccess.PREDICTIONS:
        _, api_token_key = api_token_create(
            user=user,
            name=f"Predictions of {listing.name}"[:100],
            predict_global_model_id=listing.global_model_id,
            request=request,
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
            "plan": purchase.plan_id,
            "access": listing.access,
        },
    )
    return PurchaseResult(purchase=purchase, replayed=False, api_token_key=api_token_key)


def _check_purchasable(
    *, listing: Listing, buyer: Organisation, price_cents: int, balance_cents: int
) -> None:
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
    if balance_cents < price_cents:
        raise Conflict(
            f"The price is {price_cents} cents but your wallet holds {balance_cents}; "
            f"top up at least {price_cents - balance_cents} cents."
        )


def _purchase_record(
    *,
    listing: Listing,
    user: User,
    plan: PricingPlan | None,
    price_cents: int,
    wallets: dict,
    wallet_ids: dict,
) -> Purchase:
    split = sale_split(listing=listing, amount_cents=price_cents)
    purchase = Purchase.objects.create(
        listing=listing,
        global_model_id=listing.global_model_id,
        buyer_organisation=user.organisation,
        buyer=user,
        plan=plan,
        price_cents=price_cents,
        fee_cents=split.fee_cents,
        fee_percent=settings.ONEFOLD_MARKET_FEE_PERCENT,
    )
    if price_cents > 0:
        wallet_entry_append(
            wallet=wallets[wallet_ids["buyer"]],
            kind=WalletEntryKind.PURCHASE_DEBIT,
            amount_cents=-price_cents,
            purchase=purchase,
            actor=user,
        )
    split_entries_append(split=split, wallets=wallets, wallet_ids=wallet_ids, purchase=purchase)
    Entitlement.objects.create(
        organisation=user.organisation,
        global_model_id=listing.global_model_id,
        purchase=purchase,
        access=listing.access,
    )
    return purchase


def listing_for_purchase(*, listing_id: int) -> Listing:
    listing = Listing.objects.filter(pk=listing_id).first()
    if listing is None:
        raise NotFound(f"There is no listing #{listing_id}.")
    return listing
