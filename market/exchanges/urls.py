from django.urls import path

from market.exchanges import apis

urlpatterns = [
    path("exchanges/", apis.ExchangeListApi.as_view(), name="api-exchange-list"),
    path(
        "exchanges/<int:exchange_id>/", apis.ExchangeDetailApi.as_view(), name="api-exchange-detail"
    ),
    path(
        "exchanges/<int:exchange_id>/rounds/<int:number>/logits/",
        apis.LogitsUploadApi.as_view(),
        name="api-exchange-logits",
    ),
    path(
        "exchanges/<int:exchange_id>/rounds/<int:number>/download/",
        apis.LogitsDownloadApi.as_view(),
        name="api-exchange-download",
    ),
]
