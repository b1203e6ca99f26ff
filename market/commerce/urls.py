from django.urls import path

from market.commerce.apis import (
    downloads,
    earnings,
    listings,
    money,
    plans,
    predictions,
    purchases,
    wallets,
)

urlpatterns = [
    path("listings/", listings.ListingListApi.as_view(), name="api-listing-list"),
    path(
        "listings/<int:listing_id>/", listings.ListingDetailApi.as_view(), name="api-listing-detail"
    ),
    path(
        "listings/<int:listing_id>/publish/",
        listings.ListingPublishApi.as_view(),
        name="api-listing-publish",
    ),
    path(
        "listings/<int:listing_id>/retire/",
        listings.ListingRetireApi.as_view(),
        name="api-listing-retire",
    ),
    path(
        "listings/<int:listing_id>/purchase/",
        purchases.ListingPurchaseApi.as_view(),
        name="api-listing-purchase",
    ),
    path(
        "listings/<int:listing_id>/confusion-matrix.png",
        listings.ListingConfusionMatrixApi.as_view(),
        name="api-listing-confusion-matrix",
    ),
    path(
        "listings/<int:listing_id>/reliability.png",
        listings.ListingReliabilityApi.as_view(),
        name="api-listing-reliability",
    ),
    path(
        "listings/<int:listing_id>/plans/",
        plans.PlanListApi.as_view(),
        name="api-listing-plans",
    ),
    path("purchases/", purchases.PurchaseListApi.as_view(), name="api-purchase-list"),
    path("usage/", plans.UsageApi.as_view(), name="api-usage"),
    path("wallet/", wallets.WalletApi.as_view(), name="api-wallet"),
    path(
        "organisations/<int:organisation_id>/wallet/",
        wallets.OrganisationWalletApi.as_view(),
        name="api-organisation-wallet",
    ),
    path(
        "organisations/<int:organisation_id>/wallet/top-ups/",
        wallets.TopUpApi.as_view(),
        name="api-wallet-top-up",
    ),
    path(
        "organisations/<int:organisation_id>/wallet/payouts/",
        earnings.PayoutApi.as_view(),
        name="api-wallet-payout",
    ),
    path("earnings/", earnings.EarningsApi.as_view(), name="api-earnings"),
    path("money/fees/", money.MarketFeesApi.as_view(), name="api-money-fees"),
    path("money/sales/", money.SalesApi.as_view(), name="api-money-sales"),
    path(
        "money/organisations/",
        money.OrganisationsMoneyApi.as_view(),
        name="api-money-organisations",
    ),
    path(
        "money/organisations/<int:organisation_id>/ledger/",
        money.OrganisationLedgerApi.as_view(),
        name="api-money-ledger",
    ),
    path(
        "global-models/<int:global_model_id>/download-links/",
        downloads.DownloadLinkApi.as_view(),
        name="api-download-link",
    ),
    path(
        "global-models/<int:global_model_id>/predict/",
        predictions.PredictApi.as_view(),
        name="api-model-predict",
    ),
    path("downloads/<str:token>/", downloads.DownloadApi.as_view(), name="api-download"),
]
