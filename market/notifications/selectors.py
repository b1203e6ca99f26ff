from django.db.models import QuerySet
from django.utils import timezone

from market.accounts.models import User
from market.notifications.models import Notification


def notifications_of(*, user: User) -> QuerySet[Notification]:
    """The notices of the user's organisation, newest first (none for a user without one)."""
    return Notification.objects.filter(organisation_id=user.organisation_id).order_by("-id")


def unread_count(*, user: User) -> int:
    if not user.is_authenticated or user.organisation_id is None:
        return 0
    return notifications_of(user=user).filter(read_at__isnull=True).count()


def notifications_mark_read(*, notification_ids: list[int], user: User) -> int:
    """Mark the given notices of the user's organisation read (those a page just showed)."""
    return (
        notifications_of(user=user)
        .filter(id__in=notification_ids, read_at__isnull=True)
        .update(read_at=timezone.now())
    )
