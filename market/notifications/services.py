"""Telling a silo what happened to it, and the operators what waits for them: a notice on their pages and an
e-mail to the organisation's members (or to the operators), with Django's e-mail backend, sent once the
transaction that caused it commits, so a rolled-back charge tells nobody.

Every privacy-ledger line reaches :func:`budget_entry_notify` through its ``post_save`` (market.notifications.
receivers; the ledger knows nothing of notices); only charges of a kind of spender that notifies do: the charge
itself, and a budget passing 80 % or 100 % of its limit with that charge. Audit entries reach
:func:`audit_event_notify` the same way: a sale tells each silo it credited its share; a join request and a credit
request tell the operators. A job that ends failed tells the operators (:func:`job_failed_notify`)."""

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.models import AuditEvent, AuditOutcome
from market.budgets.spending import spender_kind_get, spender_named
from market.budgets.thresholds import entry_spent_unit, entry_thresholds_crossed
from market.commerce.models import Purchase, UsageCharge, WalletEntry, WalletEntryKind
from market.federations.models import JoinRequest
from market.notifications.models import Notification, NotificationKind
from workers.numbers import credits_text, epsilon_text


def notification_create(
    *, organisation: Organisation | None, kind: str, subject: str, message: str, link: str = ""
) -> Notification:
    """Store a notice for the organisation (None: for the market's operators) and e-mail it, on commit, to its
    active members (the active operators) with an address."""
    notification = Notification.objects.create(
        organisation=organisation, kind=kind, subject=subject, message=message, link=link
    )
    transaction.on_commit(lambda: _notification_mail(notification))
    return notification


def _notification_mail(notification: Notification) -> None:
    readers = (
        notification.organisation.members
        if notification.organisation is not None
        else User.objects.filter(is_staff=True)
    )
    recipients = list(
        readers.filter(is_active=True).exclude(email="").values_list("email", flat=True)
    )
    if not recipients:
        return
    link = (
        f"\n\n{settings.ONEFOLD_PUBLIC_URL.rstrip('/')}{notification.link}"
        if notification.link
        else ""
    )
    send_mail(
        subject=f"[Onefold] {notification.subject}",
        message=notification.message + link,
        from_email=None,  # DEFAULT_FROM_EMAIL
        recipient_list=recipients,
    )


def budget_entry_notify(entry) -> list[Notification]:
    """Notices for one privacy-ledger entry (market.budgets): a charge, and each threshold it passed."""
    if entry.kind != "charge" or not spender_kind_get(entry.spender_kind).notifies:
        return []
    budget = entry.budget
    federation = budget.federation
    cause, _ = spender_named(entry.spender_kind, entry.spender_id)
    spent, limit = entry.spent_after, entry.epsilon_limit_after
    link = reverse("budget-dashboard", args=[federation.slug])
    delta = f", δ = {epsilon_text(entry.delta)}" if entry.delta is not None else ""
    spent_unit = entry_spent_unit(entry)
    notices = [
        notification_create(
            organisation=budget.organisation,
            kind=NotificationKind.BUDGET_CHARGED,
            subject=f"{cause} charged your privacy budget in {federation.name}",
            message=f"{cause} in {federation.name} charged ε = {epsilon_text(entry.epsilon)}{delta} "
            f"({entry.unit}) to your privacy budget. Spent now: ε {epsilon_text(spent)} of "
            f"{epsilon_text(limit)} ({spent_unit}).",
            link=link,
        )
    ]
    notices += [
        notification_create(
            organisation=budget.organisation,
            kind=NotificationKind.BUDGET_THRESHOLD,
            subject=f"Your privacy budget in {federation.name} passed {threshold:.0%}",
            message=f"With {cause}, your privacy budget in {federation.name} passed {threshold:.0%} of its "
            f"limit: ε {epsilon_text(spent)} of {epsilon_text(limit)} spent ({spent_unit}).",
            link=link,
        )
        for threshold in entry_thresholds_crossed(entry)
    ]
    return notices


def sale_credited_notify(purchase: Purchase) -> list[Notification]:
    """A notice to each silo whose revenue share a sale credited: which model sold, and its share (positive)."""
    credits = WalletEntry.objects.filter(
        purchase=purchase, kind=WalletEntryKind.REVENUE_CREDIT
    ).select_related("wallet__organisation", "purchase__listing")
    return [
        notification_create(
            organisation=entry.wallet.organisation,
            kind=NotificationKind.SALE_CREDITED,
            subject=f"A sale of '{purchase.listing.name}' credited you {credits_text(entry.amount_cents)} credits",
            message=f"'{purchase.listing.name}' (global model #{purchase.global_model_id}) was sold for "
            f"{credits_text(purchase.price_cents)} credits; your share of {credits_text(entry.amount_cents)} "
            "credits is in your earnings.",
            link=reverse("commerce-earnings"),
        )
        for entry in credits
    ]


def _join_request_notify(audit: AuditEvent) -> list[Notification]:
    join_request = JoinRequest.objects.select_related("federation", "organisation").get(
        id=audit.object_id
    )
    federation = join_request.federation
    return [
        notification_create(
            organisation=None,
            kind=NotificationKind.JOIN_REQUEST,
            subject=f"{join_request.organisation.name} asks to join {federation.name}",
            message=f"{join_request.organisation.name} asks to join {federation.name}: admit or refuse it on "
            "the federation's Members tab.",
            link=f"{reverse('federation-detail', args=[federation.slug])}?tab=members",
        )
    ]


def _credit_request_notify(audit: AuditEvent) -> list[Notification]:
    amount = audit.details.get("amount_cents")
    asked = f" for {credits_text(amount)} credits" if isinstance(amount, int) else ""
    who = audit.organisation.name if audit.organisation is not None else "A buyer"
    return [
        notification_create(
            organisation=None,
            kind=NotificationKind.CREDIT_REQUEST,
            subject=f"{who} asks{asked}",
            message=f"{who} asks{asked}: approve it once paid, or decline it, on the wallets page.",
            link=reverse("wallet-operations"),
        )
    ]


def _sale_notify(audit: AuditEvent) -> list[Notification]:
    return sale_credited_notify(Purchase.objects.select_related("listing").get(id=audit.object_id))


def usage_audit_notify(audit) -> Notification | None:
    """A buyer's notice from a metered call's audit entry (market.commerce.usage): the month's first charged call
    of a purchase (its trial is over or the month began), and the call that reached the plan's monthly cap."""
    details = audit.details or {}
    if audit.organisation_id is None:
        return None
    listing = f"listing #{details.get('listing')}"
    if audit.action == "usage.cap_reached":
        return notification_create(
            organisation=audit.organisation,
            kind=NotificationKind.USAGE_CAP_REACHED,
            subject=f"The monthly cap of {listing} is reached",
            message=(
                f"Your organisation predicted {details.get('month_rows')} rows of {listing} this month, its "
                "plan's cap: further calls are refused until next month."
            ),
            link=reverse("usage"),
        )
    first_charged_this_month = (
        audit.action == "usage.charged"
        and bool(details.get("amount_cents"))
        and UsageCharge.objects.filter(
            purchase_id=details.get("purchase"),
            period__gte=timezone.now().date().replace(day=1),
            amount_cents__gt=0,
        ).count()
        == 1
    )
    if first_charged_this_month:
        return notification_create(
            organisation=audit.organisation,
            kind=NotificationKind.USAGE_CHARGED,
            subject=f"Predictions of {listing} are now charged",
            message=(
                f"A call of {details.get('rows')} rows of {listing} was charged "
                f"{details.get('amount_cents')} cents, the first this month; each further call is charged "
                "from your wallet as it happens."
            ),
            link=reverse("usage"),
        )
    return None


def _usage_notify(audit: AuditEvent) -> list[Notification]:
    notice = usage_audit_notify(audit)
    return [notice] if notice is not None else []


AUDIT_NOTICES = {
    "purchase.created": _sale_notify,
    "membership.requested": _join_request_notify,
    "wallet.credit_requested": _credit_request_notify,
    "usage.charged": _usage_notify,
    "usage.cap_reached": _usage_notify,
}


def audit_event_notify(audit: AuditEvent) -> list[Notification]:
    """Notices for one successful audit entry (a sale, a join request, a credit request, a metered call); none
    otherwise."""
    notify = AUDIT_NOTICES.get(audit.action)
    if notify is None or audit.outcome != AuditOutcome.SUCCESS:
        return []
    return notify(audit)


def job_failed_notify(job) -> list[Notification]:
    """A notice to the operators that a job failed, with the first words of why."""
    reason = (job.failure_reason or "no reason recorded").strip()
    return [
        notification_create(
            organisation=None,
            kind=NotificationKind.JOB_FAILED,
            subject=f"Job #{job.id} ({job.kind}) failed in {job.federation.name}",
            message=f"Job #{job.id} ({job.kind}, {job.privacy_level}) in {job.federation.name} failed: "
            f"{reason[:300]}",
            link=reverse("job-detail", args=[job.id]),
        )
    ]
