"""Which webhook events a committed change makes, what each says, and who may receive it.

Events are derived from three rows written in the transaction of the change itself, so no other app knows of
webhooks: an audit entry (submissions validated or rejected, listings published or retired, purchases,
memberships, payouts), a job saved with its final status (the runner and ``job_cancel`` end jobs that way, and
the runner writes no audit entry) and a budget ledger line of kind ``charge``.

Who receives an event is decided by the selectors the pages and the API use, asked as a member of the receiving
organisation who is not an operator (:func:`organisation_viewer`): an organisation receives an event about an
object exactly when its members could open that object. Bodies carry only fields those readers already see.
"""

from collections.abc import Callable
from dataclasses import dataclass

from market.accounts.models import Organisation, User
from market.audit.models import AuditEvent, AuditOutcome
from market.budgets.models import BudgetEntry, EntryKind
from market.budgets.selectors import budget_get
from market.budgets.thresholds import entry_thresholds_crossed
from market.commerce.models import Listing, Purchase, WalletEntry, WalletEntryKind
from market.commerce.selectors import listing_get, purchase_list, wallet_for
from market.errors import NotFound
from market.jobs.models import Job, JobStatus
from market.jobs.selectors import job_list
from market.submissions.models import Submission
from market.submissions.selectors import submission_list
from market.webhooks.models import WebhookEventType as Type

JOB_EVENTS = {
    JobStatus.SUCCEEDED: Type.JOB_SUCCEEDED,
    JobStatus.FAILED: Type.JOB_FAILED,
    JobStatus.CANCELLED: Type.JOB_CANCELLED,
}
MEMBERSHIP_CHANGES = {
    "membership.joined": "joined",
    "membership.admitted": "admitted",
    "membership.refused": "refused",
    "membership.removed": "removed",
}


@dataclass(frozen=True)
class WebhookEvent:
    type: str
    data: dict
    may_see: Callable[[Organisation], bool]  # the visibility rule for this event's object


def organisation_viewer(organisation: Organisation) -> User:
    """An unsaved member of ``organisation`` without operator rights: what the selectors are asked as."""
    return User(organisation=organisation, organisation_id=organisation.id, is_staff=False)


def _visible(lookup: Callable[[User], object]) -> Callable[[Organisation], bool]:
    def may_see(organisation: Organisation) -> bool:
        try:
            return bool(lookup(organisation_viewer(organisation)))
        except NotFound:
            return False

    return may_see


def _own(organisation_id: int | None) -> Callable[[Organisation], bool]:
    """Events about an organisation's own membership or payout: its members see them (their own wallet, their
    own join request), nobody else's."""
    return lambda organisation: organisation_id is not None and organisation.id == organisation_id


# --- from the audit chain ---


def _submission_event(audit: AuditEvent) -> list[WebhookEvent]:
    submission = Submission.objects.select_related("federation").get(id=audit.object_id)
    rejected = audit.outcome == AuditOutcome.REFUSED
    data = {
        "submission": {
            "id": submission.id,
            "federation": submission.federation.slug,
            "status": submission.status,
            "rejection_reason": submission.rejection_reason,
        }
    }
    visible = _visible(
        lambda viewer: submission_list(user=viewer).filter(id=submission.id).exists()
    )
    return [
        WebhookEvent(
            Type.SUBMISSION_REJECTED if rejected else Type.SUBMISSION_VALIDATED, data, visible
        )
    ]


def _listing_event(audit: AuditEvent) -> list[WebhookEvent]:
    listing = Listing.objects.select_related("federation").get(id=audit.object_id)
    data = {
        "listing": {
            "id": listing.id,
            "name": listing.name,
            "federation": listing.federation.slug,
            "global_model": listing.global_model_id,
            "price_cents": listing.price_cents,
            "status": listing.status,
        }
    }
    event_type = Type.MODEL_PUBLISHED if audit.action == "listing.published" else Type.MODEL_RETIRED
    return [
        WebhookEvent(
            event_type,
            data,
            _visible(lambda viewer: listing_get(listing_id=listing.id, user=viewer)),
        )
    ]


def _purchase_event(audit: AuditEvent) -> list[WebhookEvent]:
    purchase = Purchase.objects.get(id=audit.object_id)
    data = {
        "purchase": {
            "id": purchase.id,
            "listing": purchase.listing_id,
            "global_model": purchase.global_model_id,
            "price_cents": purchase.price_cents,
        }
    }
    visible = _visible(lambda viewer: purchase_list(user=viewer).filter(id=purchase.id).exists())
    return [WebhookEvent(Type.PURCHASE_COMPLETED, data, visible), *_sale_credited_events(purchase)]


def _sale_credited_events(purchase: Purchase) -> list[WebhookEvent]:
    """One ``sale.credited`` per silo whose revenue share this sale credited, to that silo alone: its own
    wallet's entry (the buyer and the other silos never see another's share)."""
    credits = WalletEntry.objects.filter(
        purchase=purchase, kind=WalletEntryKind.REVENUE_CREDIT
    ).select_related("wallet")
    return [
        WebhookEvent(
            Type.SALE_CREDITED,
            {
                "sale": {
                    "purchase": purchase.id,
                    "listing": purchase.listing_id,
                    "global_model": purchase.global_model_id,
                    "organisation": entry.wallet.organisation_id,
                    "amount_cents": entry.amount_cents,
                }
            },
            _own(entry.wallet.organisation_id),
        )
        for entry in credits
    ]


def _payout_event(audit: AuditEvent) -> list[WebhookEvent]:
    amount = audit.details.get("amount_cents")
    data = {
        "payout": {
            "id": audit.object_id,
            "organisation": audit.organisation_id,
            "amount_cents": amount if isinstance(amount, int) else None,
        }
    }
    visible = _visible(
        lambda viewer: wallet_for(user=viewer, organisation_id=audit.organisation_id)
    )
    return [WebhookEvent(Type.PAYOUT_RECORDED, data, visible)]


USAGE_FIELDS = (
    "listing",
    "global_model",
    "rows",
    "free_rows",
    "amount_cents",
    "monthly_fee_cents",
    "month_rows",
)


def _usage_event(audit: AuditEvent) -> list[WebhookEvent]:
    """A metered call of a predictions-only purchase: the buying organisation's own use (its usage page)."""
    data = {
        "usage": {
            "charge": int(audit.object_id),
            **{name: audit.details.get(name) for name in USAGE_FIELDS},
            "remaining_cap_rows": audit.details.get("remaining_cap_rows"),
        }
    }
    event_type = (
        Type.USAGE_CAP_REACHED if audit.action == "usage.cap_reached" else Type.USAGE_CHARGED
    )
    return [WebhookEvent(event_type, data, _own(audit.organisation_id))]


def _membership_event(audit: AuditEvent) -> list[WebhookEvent]:
    data = {
        "membership": {
            "federation": audit.details.get("federation", ""),
            "organisation": audit.organisation_id,
            "change": MEMBERSHIP_CHANGES.get(audit.action, "requested"),
        }
    }
    event_type = (
        Type.MEMBERSHIP_REQUESTED
        if audit.action == "membership.requested"
        else Type.MEMBERSHIP_CHANGED
    )
    return [WebhookEvent(event_type, data, _own(audit.organisation_id))]


AUDIT_ACTIONS = {
    "submission.validated": _submission_event,
    "listing.published": _listing_event,
    "listing.retired": _listing_event,
    "purchase.created": _purchase_event,
    "wallet.payout_recorded": _payout_event,  # market.commerce.payouts
    "usage.charged": _usage_event,  # market.commerce.usage
    "usage.cap_reached": _usage_event,
    "membership.requested": _membership_event,
    **dict.fromkeys(MEMBERSHIP_CHANGES, _membership_event),
}


def events_from_audit(audit: AuditEvent) -> list[WebhookEvent]:
    """The events an audit entry makes: refusals make none, except a submission's (its rejection)."""
    derive = AUDIT_ACTIONS.get(audit.action)
    if derive is None:
        return []
    if audit.outcome != AuditOutcome.SUCCESS and audit.action != "submission.validated":
        return []
    return derive(audit)


# --- from a job's end ---


def events_from_job(job: Job) -> list[WebhookEvent]:
    event_type = JOB_EVENTS.get(job.status)
    if event_type is None:
        return []
    global_model = getattr(job, "global_model", None) if job.status == JobStatus.SUCCEEDED else None
    data = {
        "job": {
            "id": job.id,
            "federation": job.federation.slug,
            "kind": job.kind,
            "privacy_level": job.privacy_level,
            "status": job.status,
            "failure_reason": job.failure_reason,
            "global_model": global_model.id if global_model is not None else None,
        }
    }
    return [
        WebhookEvent(
            event_type,
            data,
            _visible(lambda viewer: job_list(user=viewer).filter(id=job.id).exists()),
        )
    ]


# --- from a budget charge ---


def _budget_fields(entry: BudgetEntry) -> dict:
    limit = entry.epsilon_limit_after
    return {
        "id": entry.budget_id,
        "federation": entry.budget.federation.slug,
        "epsilon_limit": str(limit),
        "spent": str(entry.spent_after),
        "reserved": str(entry.reserved_after),
        "spent_fraction": float(entry.spent_after / limit) if limit else 1.0,
    }


def events_from_budget_entry(entry: BudgetEntry) -> list[WebhookEvent]:
    if entry.kind != EntryKind.CHARGE:
        return []
    budget = _budget_fields(entry)
    visible = _visible(lambda viewer: budget_get(budget_id=entry.budget_id, user=viewer))
    charge = {
        "epsilon": str(entry.epsilon),
        "delta": format(entry.delta.normalize(), "f") if entry.delta is not None else None,
        "unit": entry.unit,
        "job": entry.spender_id_of("job"),
        "submission": entry.spender_id_of("submission"),
    }
    events = [WebhookEvent(Type.BUDGET_CHARGED, {"budget": budget, "charge": charge}, visible)]
    events += [
        WebhookEvent(
            Type.BUDGET_THRESHOLD_REACHED,
            {"budget": budget, "threshold": float(threshold)},
            visible,
        )
        for threshold in entry_thresholds_crossed(entry)
    ]
    return events
