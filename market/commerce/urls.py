from django.urls import path

from market.commerce import apis, money_apis, plan_apis

urlpatterns = [
    path("listings/", apis.ListingListApi.as_view(), name="api-listing-list"),
    path("listings/<int:listing_id>/", apis.ListingDetailApi.as_view(), name="api-listing-detail"),
    path(
        "listings/<int:listing_id>/publish/",
        apis.ListingPublishApi.as_view(),
        name="api-listing-publish",
    ),
    path(
        "listings/<int:listing_id>/retire/",
        apis.ListingRetireApi.as_view(),
        name="api-listing-retire",
    ),
    path(
        "listings/<int:listing_id>/purchase/",
        apis.ListingPurchaseApi.as_view(),
        name="api-listing-purchase",
    ),
    path(
        "listings/<int:listing_id>/confusion-matrix.png",
        apis.ListingConfusionMatrixApi.as_view(),
        name="api-listing-confusion-matrix",
    ),
    path(
        "listings/<int:listing_id>/reliability.png",
        apis.ListingReliabilityApi.as_view(),
        name="api-listing-reliability",
    ),
    path(
        "listings/<int:listing_id>/plans/",
        plan_apis.PlanListApi.as_view(),
        name="api-listing-plans",
    ),
    path("purchases/", apis.PurchaseListApi.as_view(), name="api-purchase-list"),
    path("usage/", plan_apis.UsageApi.as_view(), name="api-usage"),
    path("wallet/", apis.WalletApi.as_view(), name="api-wallet"),
    path(
        "organisations/<int:organisation_id>/wallet/",
        apis.OrganisationWalletApi.as_view(),
        name="api-organisation-wallet",
    ),
    path(
        "organisations/<int:organisation_id>/wallet/top-ups/",
        apis.TopUpApi.as_view(),
        name="api-wallet-top-up",
    ),
    path(
        "organisations/<int:organisation_id>/wallet/payouts/",
        apis.PayoutApi.as_view(),
        name="api-wallet-payout",
    ),
    path("earnings/", apis.EarningsApi.as_view(), name="api-earnings"),
    path("money/fees/", money_apis.MarketFeesApi.as_view(), name="api-money-fees"),
    path("money/sales/", money_apis.SalesApi.as_view(), name="api-money-sales"),
    path(
        "money/organisations/",
        money_apis.OrganisationsMoneyApi.as_view(),
        name="api-money-organisations",
    ),
    path(
        "money/organisations/<int:organisation_id>/ledger/",
        money_apis.OrganisationLedgerApi.as_view(),
        name="api-money-ledger",
    ),
    path(
        "global-models/<int:global_model_id>/download-links/",
        apis.DownloadLinkApi.as_view(),
        name="api-download-link",
    ),
    path(
        "global-models/<int:global_model_id>/predict/",
        apis.PredictApi.as_view(),
        name="api-model-predict",
    ),
    path("downloads/<str:token>/", apis.DownloadApi.as_view(), name="api-download"),
]
