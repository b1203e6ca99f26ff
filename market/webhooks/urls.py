from django.urls import path

from market.webhooks import apis

urlpatterns = [
    path("webhook-endpoints/", apis.WebhookEndpointListApi.as_view(), name="api-webhook-list"),
    path(
        "webhook-endpoints/<int:endpoint_id>/",
        apis.WebhookEndpointApi.as_view(),
        name="api-webhook-detail",
    ),
    path(
        "webhook-endpoints/<int:endpoint_id>/rotate-secret/",
        apis.WebhookEndpointRotateApi.as_view(),
        name="api-webhook-rotate",
    ),
    path(
        "webhook-endpoints/<int:endpoint_id>/disable/",
        apis.WebhookEndpointDisableApi.as_view(),
        name="api-webhook-disable",
    ),
    path(
        "webhook-endpoints/<int:endpoint_id>/enable/",
        apis.WebhookEndpointEnableApi.as_view(),
        name="api-webhook-enable",
    ),
    path(
        "webhook-endpoints/<int:endpoint_id>/ping/",
        apis.WebhookEndpointPingApi.as_view(),
        name="api-webhook-ping",
    ),
    path(
        "webhook-endpoints/<int:endpoint_id>/deliveries/",
        apis.WebhookDeliveryListApi.as_view(),
        name="api-webhook-deliveries",
    ),
    path(
        "webhook-deliveries/<int:delivery_id>/redeliver/",
        apis.WebhookRedeliverApi.as_view(),
        name="api-webhook-redeliver",
    ),
]
