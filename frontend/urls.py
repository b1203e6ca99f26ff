from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import (
    augmentations_views,
    budgets_views,
    commerce_views,
    exchanges_views,
    home_views,
    invitation_views,
    jobs_views,
    membership_views,
    model_use_views,
    money_views,
    notifications_views,
    operator_views,
    security_views,
    usage_views,
    views,
    webhooks_views,
)

urlpatterns = [
    path("", home_views.home, name="home"),
    path("sign-in/", home_views.SignInView.as_view(), name="login"),
    path("sign-out/", auth_views.LogoutView.as_view(), name="logout"),
    path("federations/", views.federation_list_page, name="federation-list"),
    path("federations/new/", operator_views.federation_create_page, name="federation-create"),
    path("federations/<slug:slug>/", views.federation_detail_page, name="federation-detail"),
    path(
        "federations/<slug:slug>/data/", operator_views.federation_data_page, name="federation-data"
    ),
    path("federations/<slug:slug>/join/", views.federation_join_action, name="federation-join"),
    path("people/", invitation_views.invitation_list_page, name="invitation-list"),
    path(
        "people/invitations/<int:invitation_id>/withdraw/",
        invitation_views.invitation_revoke_action,
        name="invitation-revoke",
    ),
    path(
        "invitations/<str:token>/",
        invitation_views.invitation_accept_page,
        name="invitation-accept",
    ),
    path(
        "federations/<slug:slug>/edit/",
        membership_views.federation_edit_page,
        name="federation-edit",
    ),
    path(
        "federations/<slug:slug>/members/<int:organisation_id>/remove/",
        membership_views.member_remove_action,
        name="member-remove",
    ),
    path(
        "join-requests/<int:join_request_id>/admit/",
        membership_views.join_request_admit_action,
        name="join-request-admit",
    ),
    path(
        "join-requests/<int:join_request_id>/refuse/",
        membership_views.join_request_refuse_action,
        name="join-request-refuse",
    ),
    path("federations/<slug:slug>/upload/", views.submission_upload_page, name="submission-upload"),
    path("submissions/", views.submission_list_page, name="submission-list"),
    path("exchanges/", exchanges_views.exchange_list_page, name="exchange-list"),
    path(
        "exchanges/<int:exchange_id>/", exchanges_views.exchange_detail_page, name="exchange-detail"
    ),
    path(
        "federations/<slug:slug>/augmentations/new/",
        augmentations_views.augmentation_create_page,
        name="augmentation-create",
    ),
    path(
        "augmentations/<int:augmentation_id>/",
        augmentations_views.augmentation_detail_page,
        name="augmentation-detail",
    ),
    path(
        "augmentations/<int:augmentation_id>/seeds/",
        augmentations_views.augmentation_seeds_action,
        name="augmentation-seeds",
    ),
    path(
        "augmentations/<int:augmentation_id>/start/",
        augmentations_views.augmentation_start_action,
        name="augmentation-start",
    ),
    path(
        "augmentations/<int:augmentation_id>/cancel/",
        augmentations_views.augmentation_cancel_action,
        name="augmentation-cancel",
    ),
    path(
        "submissions/<int:submission_id>/status/",
        views.submission_status_partial,
        name="submission-status",
    ),
    path("security/audit/", security_views.audit_log_page, name="audit-log"),
    path("security/audit/export.jsonl", security_views.audit_export_download, name="audit-export"),
    path("security/tokens/", security_views.token_list_page, name="token-list"),
    path("security/tokens/new/", security_views.token_create_action, name="token-create"),
    path(
        "security/tokens/<int:token_id>/revoke/",
        security_views.token_revoke_action,
        name="token-revoke",
    ),
    path("security/webhooks/", webhooks_views.webhook_list_page, name="webhook-list"),
    path("security/webhooks/new/", webhooks_views.webhook_create_action, name="webhook-create"),
    path(
        "security/webhooks/<int:endpoint_id>/",
        webhooks_views.webhook_endpoint_page,
        name="webhook-endpoint",
    ),
    path(
        "security/webhooks/<int:endpoint_id>/rotate/",
        webhooks_views.webhook_rotate_action,
        name="webhook-rotate",
    ),
    path(
        "security/webhooks/<int:endpoint_id>/active/",
        webhooks_views.webhook_active_action,
        name="webhook-active",
    ),
    path(
        "security/webhooks/<int:endpoint_id>/ping/",
        webhooks_views.webhook_ping_action,
        name="webhook-ping",
    ),
    path(
        "security/webhooks/deliveries/<int:delivery_id>/redeliver/",
        webhooks_views.webhook_redeliver_action,
        name="webhook-redeliver",
    ),
    path("market/", commerce_views.catalog_page, name="commerce-catalog"),
    path("market/listings/<int:listing_id>/", commerce_views.listing_page, name="commerce-listing"),
    path(
        "market/listings/<int:listing_id>/buy/",
        commerce_views.purchase_confirm_page,
        name="commerce-confirm",
    ),
    path(
        "market/listings/<int:listing_id>/purchase/",
        commerce_views.purchase_action,
        name="commerce-purchase",
    ),
    path(
        "market/listings/<int:listing_id>/publish/",
        commerce_views.listing_state_action,
        {"action": "publish"},
        name="commerce-listing-publish",
    ),
    path(
        "market/listings/<int:listing_id>/retire/",
        commerce_views.listing_state_action,
        {"action": "retire"},
        name="commerce-listing-retire",
    ),
    path("market/purchases/", commerce_views.purchases_page, name="commerce-purchases"),
    path("market/usage/", usage_views.usage_page, name="usage"),
    path(
        "market/listings/<int:listing_id>/plans/",
        usage_views.plan_create_action,
        name="commerce-plan-create",
    ),
    path(
        "market/models/<int:global_model_id>/download/",
        commerce_views.download_action,
        name="commerce-download",
    ),
    path(
        "market/models/<int:global_model_id>/use/", model_use_views.model_use_page, name="model-use"
    ),
    path(
        "market/models/<int:global_model_id>/package/",
        model_use_views.model_download_action,
        name="model-download",
    ),
    path(
        "market/models/<int:global_model_id>/feature-spec.json",
        model_use_views.model_feature_spec_download,
        name="model-feature-spec",
    ),
    path(
        "market/models/<int:global_model_id>/try/",
        model_use_views.model_try_partial,
        name="model-try",
    ),
    path(
        "market/models/<int:global_model_id>/list/",
        operator_views.listing_create_page,
        name="listing-create",
    ),
    path("market/wallet/", commerce_views.wallet_page, name="commerce-wallet"),
    path(
        "market/wallet/add-credits/",
        operator_views.credit_request_create_action,
        name="wallet-credit-request",
    ),
    path("market/wallets/", operator_views.wallet_operations_page, name="wallet-operations"),
    path("market/money/", money_views.money_page, name="money"),
    path("notices/", notifications_views.notification_list_page, name="notification-list"),
    path(
        "market/money/organisations/<int:organisation_id>/",
        money_views.organisation_ledger_page,
        name="money-ledger",
    ),
    path(
        "market/credit-requests/<int:credit_request_id>/approve/",
        operator_views.credit_request_decide_action,
        {"decision": "approve"},
        name="credit-request-approve",
    ),
    path(
        "market/credit-requests/<int:credit_request_id>/decline/",
        operator_views.credit_request_decide_action,
        {"decision": "decline"},
        name="credit-request-decline",
    ),
    path("market/earnings/", commerce_views.earnings_page, name="commerce-earnings"),
    path("budgets/", budgets_views.budget_index_page, name="budget-index"),
    path(
        "federations/<slug:slug>/budgets/",
        budgets_views.budget_dashboard_page,
        name="budget-dashboard",
    ),
    path(
        "federations/<slug:slug>/budgets/ledger/",
        budgets_views.budget_ledger_page,
        name="budget-ledger",
    ),
    path(
        "federations/<slug:slug>/budgets/price/",
        budgets_views.budget_price_action,
        name="budget-price",
    ),
    path(
        "federations/<slug:slug>/budgets/<int:budget_id>/limit/",
        budgets_views.budget_limit_action,
        name="budget-limit",
    ),
    path("jobs/", jobs_views.job_list_page, name="job-list"),
    path("jobs/<int:job_id>/", jobs_views.job_detail_page, name="job-detail"),
    path("jobs/<int:job_id>/progress/", jobs_views.job_progress_partial, name="job-progress"),
    path("jobs/<int:job_id>/cancel/", jobs_views.job_cancel_action, name="job-cancel"),
    path("jobs/<int:job_id>/comparison.png", jobs_views.job_comparison_png, name="job-comparison"),
    path("federations/<slug:slug>/jobs/new/", jobs_views.job_launch_page, name="job-launch"),
    path("federations/<slug:slug>/jobs/price/", jobs_views.job_price_partial, name="job-price"),
    path(
        "federations/<slug:slug>/jobs/estimate/",
        jobs_views.job_estimate_action,
        name="job-estimate",
    ),
    path(
        "job-estimates/<int:estimate_id>/",
        jobs_views.job_estimate_partial,
        name="job-estimate-progress",
    ),
]
