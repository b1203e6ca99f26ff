"""Reads of the market: the catalog, listings, wallets and their ledgers, purchases, earnings, entitlements."""

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

from django.db.models import Count, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from market.accounts.models import Organisation, User
from market.accounts.selectors import organisation_find
from market.commerce.catalog_cache import catalog_cached
from market.commerce.models import (
    CreditRequest,
    CreditRequestStatus,
    Entitlement,
    Listing,
    ListingAccess,
    ListingStatus,
    Purchase,
    Wallet,
    WalletEntry,
    WalletEntryKind,
)
from market.errors import InvalidInput, NotFound, PermissionDenied
from market.jobs.models import GlobalModel
from market.jobs.quality import catalog_flags

Presented = TypeVar("Presented")

CATALOG_ORDERINGS = {
    "newest": ["-published_at", "-id"],
    "oldest": ["published_at", "id"],
    "price": ["price_cents", "id"],
    "-price": ["-price_cents", "-id"],
    "accuracy": ["accuracy", "id"],
    "-accuracy": ["-accuracy", "-id"],
    "name": ["name", "id"],
    "-name": ["-name", "-id"],
}
METRIC_THRESHOLDS = {
    "min_accuracy": "accuracy",
    "min_balanced_accuracy": "balanced_accuracy",
    "min_macro_f1": "macro_f1",
    "min_roc_auc": "roc_auc",
}


@dataclass(frozen=True)
class CatalogFilters:
    search: str = ""
    federation: str = ""
    model_family: str = ""
    privacy_level: str = ""
    min_price_cents: int | None = None
    max_price_cents: int | None = None
    metric_minimums: tuple[tuple[str, float], ...] = ()  # (field, minimum)
    status: str = ""  # operators only; others always see published listings
    ordering: str = "newest"


def catalog_filters_from(params) -> CatalogFilters:
    """Parse query parameters (a QueryDict or dict); a malformed number is a 400 naming the parameter."""

    def number(name: str, kind):
        value = (params.get(name) or "").strip()
        if not value:
            return None
        try:
            return kind(value)
        except ValueError:
            raise InvalidInput(f"The filter '{name}' must be a number, not {value!r}.") from None

    ordering = params.get("ordering") or "newest"
    if ordering not in CATALOG_ORDERINGS:
        raise InvalidInput(f"Order by one of {', '.join(CATALOG_ORDERINGS)}, not {ordering!r}.")
    status = params.get("status") or ""
    if status and status not in ListingStatus.values:
        raise InvalidInput(f"The status filter must be one of {', '.join(ListingStatus.values)}.")
    minimums = tuple(
        (field, value)
        for name, field in METRIC_THRESHOLDS.items()
        if (value := number(name, float)) is not None
    )
    return CatalogFilters(
        search=(params.get("search") or "").strip(),
        federation=params.get("federation") or "",
        model_family=params.get("model_family") or "",
        privacy_level=params.get("privacy_level") or "",
        min_price_cents=number("min_price", int),
        max_price_cents=number("max_price", int),
        metric_minimums=minimums,
        status=status,
        ordering=ordering,
    )


def listing_list(*, user: User, filters: CatalogFilters = CatalogFilters()) -> QuerySet[Listing]:
    """The catalog: published listings (operators: any status, or the one asked for), filtered and ordered."""
    listings = Listing.objects.select_related("federation")
    if user.is_operator:
        listings = listings.filter(status=filters.status) if filters.status else listings
    else:
        listings = listings.filter(status=ListingStatus.PUBLISHED)
    if filters.search:
        listings = listings.filter(
            Q(name__icontains=filters.search) | Q(description__icontains=filters.search)
        )
    exact = {
        "federation__slug": filters.federation,
        "model_family": filters.model_family,
        "privacy_level": filters.privacy_level,
    }
    listings = listings.filter(**{field: value for field, value in exact.items() if value})
    if filters.min_price_cents is not None:
        listings = listings.filter(price_cents__gte=filters.min_price_cents)
    if filters.max_price_cents is not None:
        listings = listings.filter(price_cents__lte=filters.max_price_cents)
    for field, minimum in filters.metric_minimums:
        listings = listings.filter(**{f"{field}__gte": minimum})
    return listings.order_by(*CATALOG_ORDERINGS[filters.ordering])


def catalog_listings(*, user: User, filters: CatalogFilters) -> QuerySet[Listing]:
    """The catalog page's listings, each with its global model and the model's federation (the page reads each
    model's quality flags)."""
    return listing_list(user=user, filters=filters).select_related("global_model__federation")


def catalog_page(
    *,
    user: User,
    filters: CatalogFilters,
    fields: tuple[str, ...],
    limit: int,
    offset: int,
    present: Callable[[int, list[dict]], Presented],
    presentation: Hashable,
) -> Presented:
    """One page of the catalog (``listing_list``'s rule) as ``present(count, rows)`` makes it, from the cache while
    no listing has changed. ``count`` is how many listings match the filters; ``rows`` are the page's
    ``.values(*fields)``, in catalog order. ``presentation`` is whatever else ``present``'s result depends on (a
    rendered page: its address and media type), so that a cached result is only served where it is the same."""
    audience = (
        "operator" if user.is_operator else "everyone else"
    )  # the only thing listing_list asks of the user

    def read() -> Presented:
        listings = listing_list(user=user, filters=filters)
        count = listings.count()
        rows = (
            list(listings.values(*fields)[offset : offset + limit])
            if count > 0 and offset <= count
            else []
        )
        return present(count, rows)

    return catalog_cached((audience, filters, fields, limit, offset, presentation), read)


def catalog_flags_of(*, global_model_ids: list[int]) -> dict[int, list[str]]:
    """The catalog's warning badges (market.jobs.quality.catalog_flags) of each global model, by id: the web's
    catalog and the API's (which the toolkit's ``catalog`` prints) carry the same ones."""
    global_models = GlobalModel.objects.select_related("federation").filter(pk__in=global_model_ids)
    return {global_model.id: catalog_flags(global_model) for global_model in global_models}


def listing_get(*, listing_id: int, user: User) -> Listing:
    """A listing the user may see: published or retired ones for everyone, drafts for operators only."""
    listing = (
        Listing.objects.select_related("federation", "global_model__job__public_dataset")
        .filter(pk=listing_id)
        .first()
    )
    if listing is None or (listing.status == ListingStatus.DRAFT and not user.is_operator):
        raise NotFound(f"There is no listing #{listing_id}.")
    return listing


def global_model_get(*, global_model_id: int) -> GlobalModel:
    global_model = (
        GlobalModel.objects.select_related("federation", "job__public_dataset")
        .filter(pk=global_model_id)
        .first()
    )
    if global_model is None:
        raise NotFound(f"There is no global model #{global_model_id}.")
    return global_model


def entitlement_exists(*, user: User, global_model: GlobalModel) -> bool:
    return (
        user.organisation_id is not None
        and Entitlement.objects.filter(
            organisation_id=user.organisation_id, global_model=global_model
        ).exists()
    )


def predictions_entitlement(*, user: User, global_model_id: int) -> Entitlement | None:
    """The organisation's predictions-only entitlement to the model, if that is what it bought."""
    if user.organisation_id is None:
        return None
    return (
        Entitlement.objects.filter(
            organisation_id=user.organisation_id,
            global_model_id=global_model_id,
            access=ListingAccess.PREDICTIONS,
        )
        .select_related("purchase__listing__global_model__federation", "purchase__plan")
        .first()
    )


def global_model_require_access(*, user: User, global_model_id: int) -> GlobalModel:
    """The global model, if the user's organisation bought it (operators: always). Anyone else gets the same
    404 as for a model that does not exist, so ids cannot be probed."""
    global_model = (
        GlobalModel.objects.select_related("federation", "job__public_dataset")
        .filter(pk=global_model_id)
        .first()
    )
    if global_model is None or not (
        user.is_operator or entitlement_exists(user=user, global_model=global_model)
    ):
        raise NotFound(
            f"There is no global model #{global_model_id} that your organisation has bought."
        )
    return global_model


def organisation_get(*, organisation_id: int) -> Organisation:
    """The organisation with this id (its wallet, payouts or earnings are asked for); NotFound, naming the id,
    when there is none."""
    organisation = organisation_find(organisation_id=organisation_id)
    if organisation is None:
        raise NotFound(f"There is no organisation #{organisation_id}.")
    return organisation


def wallet_of(*, organisation: Organisation) -> Wallet | None:
    return Wallet.objects.filter(organisation=organisation).first()


def wallet_for(
    *, user: User, organisation_id: int | None = None
) -> tuple[Organisation, int, QuerySet[WalletEntry]]:
    """An organisation's balance and ledger (newest first): the user's own, or any for an operator."""
    organisation_id = organisation_id if organisation_id is not None else user.organisation_id
    if organisation_id is None:
        raise NotFound("You belong to no organisation, so you have no wallet.")
    if not user.is_operator and organisation_id != user.organisation_id:
        raise NotFound(f"There is no wallet of organisation #{organisation_id} that you can read.")
    organisation = organisation_get(organisation_id=organisation_id)
    wallet = wallet_of(organisation=organisation)
    entries = (
        WalletEntry.objects.filter(wallet=wallet).select_related("purchase__listing")
        if wallet
        else WalletEntry.objects.none()
    )
    return organisation, wallet.balance_cents if wallet else 0, entries.order_by("-id")


def purchase_list(*, user: User) -> QuerySet[Purchase]:
    purchases = Purchase.objects.select_related("listing", "buyer_organisation", "global_model")
    if not user.is_operator:
        purchases = purchases.filter(buyer_organisation_id=user.organisation_id)
    return purchases.order_by("-created_at", "-id")


def purchase_list_with_files(*, user: User) -> QuerySet[Purchase]:
    """``purchase_list`` with each model's files (the purchases page offers each file for download)."""
    return purchase_list(user=user).prefetch_related("global_model__files")


def earnings_for(*, organisation: Organisation) -> dict:
    """A silo's revenue shares: the total, per listing (sales and, for predictions-only listings, metered use), and
    per purchase (newest first)."""
    all_credits = WalletEntry.objects.filter(
        wallet__organisation=organisation, kind=WalletEntryKind.REVENUE_CREDIT
    )
    from_use = Q(usage_charge__isnull=False)
    per_listing = list(
        all_credits.values("purchase__listing_id", "purchase__listing__name")
        .annotate(
            earned_cents=Sum("amount_cents"),
            sales=Count("id", filter=~from_use),
            usage_earned_cents=Coalesce(Sum("amount_cents", filter=from_use), Value(0)),
            usage_calls=Count("id", filter=from_use),
        )
        .order_by("-earned_cents", "purchase__listing_id")
    )
    credits = all_credits.filter(usage_charge__isnull=True)
    per_purchase = list(credits.select_related("purchase__listing").order_by("-id"))
    return {
        "total_cents": sum(row["earned_cents"] for row in per_listing),
        "usage_total_cents": sum(row["usage_earned_cents"] for row in per_listing),
        "per_listing": [
            {
                "listing_id": row["purchase__listing_id"],
                "listing_name": row["purchase__listing__name"],
                "earned_cents": row["earned_cents"],
                "sales": row["sales"],
                "usage_earned_cents": row["usage_earned_cents"],
                "usage_calls": row["usage_calls"],
            }
            for row in per_listing
        ],
        "per_purchase": [
            {
                "purchase_id": entry.purchase_id,
                "listing_id": entry.purchase.listing_id,
                "listing_name": entry.purchase.listing.name,
                "price_cents": entry.purchase.price_cents,
                "earned_cents": entry.amount_cents,
                "created_at": entry.created_at,
            }
            for entry in per_purchase
        ],
    }


def earnings_organisation(*, user: User, organisation_id: int | None = None) -> Organisation:
    organisation_id = organisation_id if organisation_id is not None else user.organisation_id
    if organisation_id is None or (
        not user.is_operator and organisation_id != user.organisation_id
    ):
        raise PermissionDenied("You can read your own organisation's earnings only.")
    organisation = organisation_get(organisation_id=organisation_id)
    return organisation


def credit_requests_of(*, organisation: Organisation) -> QuerySet[CreditRequest]:
    """An organisation's requests for credits, newest first."""
    return CreditRequest.objects.filter(organisation=organisation).order_by("-created_at", "-id")


def credit_requests_waiting_count(*, user: User) -> int:
    """Operators: how many buyers' credit requests wait for approval (the overview lists what waits for them)."""
    if not user.is_operator:
        raise PermissionDenied("Only market operators can see the credit requests waiting.")
    return CreditRequest.objects.filter(status=CreditRequestStatus.PENDING).count()


def credit_requests_pending() -> QuerySet[CreditRequest]:
    """The buyers' credit requests waiting for an operator, oldest first."""
    return (
        CreditRequest.objects.filter(status=CreditRequestStatus.PENDING)
        .select_related("organisation", "requested_by")
        .order_by("id")
    )


def credit_requests_decided(*, limit: int) -> QuerySet[CreditRequest]:
    """The latest ``limit`` credit requests an operator approved or declined."""
    return CreditRequest.objects.exclude(status=CreditRequestStatus.PENDING).select_related(
        "organisation", "decided_by"
    )[:limit]


def credit_request_get(*, credit_request_id: int) -> CreditRequest:
    """The credit request with this id, with its organisation; NotFound, naming the id, when there is none."""
    credit_request = (
        CreditRequest.objects.select_related("organisation").filter(pk=credit_request_id).first()
    )
    if credit_request is None:
        raise NotFound(f"There is no credit request #{credit_request_id}.")
    return credit_request
