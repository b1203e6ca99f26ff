"""A silo's notices (market.notifications): newest first; the ones a page shows are read from then on."""

from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from frontend.decorators import page
from market.notifications.selectors import notifications_mark_read, notifications_of

NOTICES_PER_PAGE = 30


@require_GET
@page
def notification_list_page(request):
    notices = Paginator(notifications_of(user=request.user), NOTICES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    shown = list(notices)
    unread = {notice.id for notice in shown if notice.read_at is None}
    notifications_mark_read(notification_ids=sorted(unread), user=request.user)
    return render(
        request,
        "frontend/notifications.html",
        {"section": "notifications", "notices": notices, "shown": shown, "unread": unread},
    )
