"""Telling a silo what happened to it: a notice on its pages and an e-mail to its members (Django's e-mail
backend, sent once the transaction that caused it commits, so a rolled-back charge tells nobody).

Every privacy-ledger line reaches :func:`budget_entry_notify` through its ``post_save`` (market.notifications.
receivers; the ledger knows nothing of notices); only charges of a kind of spender that notifies do: the charge
itself, and a budget passing 80 % or 100 % of its limit with that charge."""

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from market.accounts.models import Organisation
from market.budgets.spending import spender_kind_get, spender_named
from market.budgets.thresholds import entry_spent_unit, entry_thresholds_crossed
from market.commerce.models import UsageCharge
from market.notifications.models import Notification, NotificationKind
from market.numbers import epsilon_text


def notification_create(
    *, organisation: Organisation, kind: str, subject: str, message: str, link: str = ""
) -> Notification:
    """Store a notice for the organisation and e-mail it, on commit, to its active members with an address."""
    notification = Notification.objects.create(
        organisation=organisation, kind=kind, subject=subject, message=message, link=link
    )
    transaction.on_commit(lambda: _notification_mail(notification))
    return notification


def _notification_mail(notification: Notification) -> None:
    recipients = list(
        notification.organisation.members.filter(is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
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
