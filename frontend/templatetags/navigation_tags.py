from django import template

from frontend.navigation import navigation_items, roles_of
from market.notifications.selectors import unread_count

register = template.Library()


@register.inclusion_tag("frontend/partials/main_navigation.html", takes_context=True)
def main_navigation(context):
    user = context["user"]
    return {
        "items": navigation_items(user),
        "roles": roles_of(user),
        "section": context.get("section"),
        "user": user,
        "unread_notices": unread_count(user=user),
    }
