"""Webhook pages (organisation settings): endpoints, their secrets shown once, delivery logs, redelivery."""

from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from frontend.sent_once import sent_once
from market.webhooks.models import WebhookEventType
from market.webhooks.selectors import (
    webhook_attempt_log,
    webhook_delivery_list,
    webhook_endpoint_get,
    webhook_endpoint_list,
)
from market.webhooks.services import (
    webhook_endpoint_create,
    webhook_endpoint_ping,
    webhook_endpoint_rotate,
    webhook_endpoint_set_active,
    webhook_redeliver,
)

DELIVERIES_SHOWN = 50


def _list_page(request, **extra):
    return render(
        request,
        "frontend/webhooks/list.html",
        {
            "section": "webhooks",
            "endpoints": webhook_endpoint_list(user=request.user),
            "event_types": WebhookEventType.choices,
            **extra,
        },
    )


def _endpoint_page(request, endpoint, **extra):
    return render(
        request,
        "frontend/webhooks/endpoint.html",
        {
            "section": "webhooks",
            "endpoint": endpoint,
            "deliveries": webhook_delivery_list(endpoint=endpoint)[:DELIVERIES_SHOWN],
            "attempts": webhook_attempt_log(endpoint=endpoint, limit=DELIVERIES_SHOWN),
            **extra,
        },
    )


@require_GET
@page
def webhook_list_page(request):
    return _list_page(request)


@require_POST
@page
@sent_once
def webhook_create_action(request):
    endpoint, secret = webhook_endpoint_create(
        user=request.user,
        url=request.POST.get("url", ""),
        events=request.POST.getlist("events"),
        description=request.POST.get("description", ""),
        request=request,
    )
    # The secret is shown on this response only; a reload does not show it again.
    return _list_page(request, new_endpoint=endpoint, new_secret=secret)


@require_GET
@page
def webhook_endpoint_page(request, endpoint_id):
    return _endpoint_page(request, webhook_endpoint_get(user=request.user, endpoint_id=endpoint_id))


@require_POST
@page
@sent_once
def webhook_rotate_action(request, endpoint_id):
    endpoint, secret = webhook_endpoint_rotate(
        user=request.user, endpoint_id=endpoint_id, request=request
    )
    return _endpoint_page(request, endpoint, new_secret=secret)


@require_POST
@page
@sent_once
def webhook_active_action(request, endpoint_id):
    webhook_endpoint_set_active(
        user=request.user,
        endpoint_id=endpoint_id,
        active=request.POST.get("active") == "true",
        request=request,
    )
    return redirect("webhook-endpoint", endpoint_id=endpoint_id)


@require_POST
@page
@sent_once
def webhook_redeliver_action(request, delivery_id):
    delivery = webhook_redeliver(user=request.user, delivery_id=delivery_id, request=request)
    return redirect("webhook-endpoint", endpoint_id=delivery.endpoint_id)


@require_POST
@page
@sent_once
def webhook_ping_action(request, endpoint_id):
    webhook_endpoint_ping(user=request.user, endpoint_id=endpoint_id, request=request)
    return redirect("webhook-endpoint", endpoint_id=endpoint_id)
