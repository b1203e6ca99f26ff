"""Writes of the market's catalogue: listings (create a draft, publish it through the quality gate, retire it),
and the checks the app's other writes share (who is an operator, the largest amount of money).

The money moves in the modules beside it: credits into wallets (market.commerce.wallets), purchases and their
revenue shares (market.commerce.purchases), payouts (market.commerce.payouts).
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from market.accounts.models import User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.commerce.catalog_cache import catalog_changed
from market.commerce.models import Listing, ListingAccess, ListingStatus
from market.commerce.packages import raw_column_members
from market.errors import Conflict, InvalidInput, PermissionDenied
from market.jobs.models import GlobalModel
from market.jobs.quality import QualityVerdict, quality_verdict

#: The largest price, top-up, credit request or payout, in cents: far above any real sale, far below the
#: BIGINT columns' limit, so that no sum of a few of them can overflow a balance.
MAX_PRICE_CENTS = 10**12


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


@dataclass(frozen=True)
class PredictionLimits:
    """What a predictions-only listing allows one buyer (None: no limit beyond the platform's own)."""

    max_rows_per_call: int | None = None
    max_rows_per_day: int | None = None
    max_calls_per_minute: int | None = None


def _check_access(*, access: str, limits: PredictionLimits) -> None:
    if access not in ListingAccess.values:
        raise InvalidInput(
            f"A listing's access is one of {', '.join(ListingAccess.values)}, not {access!r}."
        )
    values = [value for value in vars(limits).values() if value is not None]
    if values and access != ListingAccess.PREDICTIONS:
        raise InvalidInput(
            "Limits on rows and calls apply to predictions-only listings; set access to predictions."
        )
    if any(not 1 <= value <= 10**9 for value in values):
        raise InvalidInput("Each limit must be between 1 and 1000000000.")


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
    access: str = ListingAccess.DOWNLOAD,
    limits: PredictionLimits | None = None,
    request=None,
) -> Listing:
    """A draft listing of ``global_model``; its model family, privacy level and metrics are copied from it.
    ``access``: download (the files) or predictions only (an API token for the predict endpoint), with ``limits``
    on rows per call, rows per day and calls per minute."""
    require_operator(actor, "create listings")
    _check_listing_terms(name=name, licence_text=licence_text, price_cents=price_cents)
    limits = limits or PredictionLimits()
    _check_access(access=access, limits=limits)
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
        access=access,
        max_rows_per_call=limits.max_rows_per_call,
        max_rows_per_day=limits.max_rows_per_day,
        max_calls_per_minute=limits.max_calls_per_minute,
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
        details={"global_model": global_model.id, "price_cents": price_cents, "access": access},
    )
    return listing


class PublishGateRefused(Conflict):
    """The model does not beat the majority-class guess by the publish margin and no override reason was given."""


MAX_OVERRIDE_REASON = 2000


def listing_publish(
    *, listing: Listing, actor: User, override_reason: str = "", request=None
) -> Listing:
    """Draft → published; a published previous version is retired at the same moment.

    The publish gate (market.jobs.quality) refuses a model that does not beat the majority-class guess by
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
