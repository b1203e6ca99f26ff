from django.db.models import Q, QuerySet
from django.utils import timezone

from market.accounts.models import User
from market.notifications.models import Notification


def notifications_of(*, user: User) -> QuerySet[Notification]:
    """The notices of the user's organisation, and for an operator the operators' notices (those without an
    organisation), newest first; none for anyone else."""
    mine = Q(pk__in=[])
    if user.organisation_id is not None:
        mine |= Q(organisation_id=user.organisation_id)
    if user.is_operator:
        mine |= Q(organisation__isnull=True)
    return Notification.objects.filter(mine).order_by("-id")


def unread_count(*, user: User) -> int:
    if not user.is_authenticated or (user.organisation_id is None and not user.is_operator):
        return 0
    return notifications_of(user=user).filter(read_at__isnull=True).count()


def notifications_mark_read(*, notification_ids: list[int], user: User) -> int:
    """Mark the given notices of the user's organisation read (those a page just showed)."""
    return (
        notifications_of(user=user)
        .filter(id__in=notification_ids, read_at__isnull=True)
        .update(read_at=timezone.now())
    )
