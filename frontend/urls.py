from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import budgets_views, commerce_views, security_views, views
from market.accounts.forms import SignInForm

urlpatterns = [
    path("", views.home, name="home"),
    path("sign-in/", auth_views.LoginView.as_view(template_name="frontend/login.html", redirect_authenticated_user=True,
                                                  authentication_form=SignInForm),
         name="login"),
    path("sign-out/", auth_views.LogoutView.as_view(), name="logout"),
    path("federations/", views.federation_list_page, name="federation-list"),
    path("federations/<slug:slug>/", views.federation_detail_page, name="federation-detail"),
    path("federations/<slug:slug>/join/", views.federation_join_action, name="federation-join"),
    path("federations/<slug:slug>/upload/", views.submission_upload_page, name="submission-upload"),
    path("submissions/", views.submission_list_page, name="submission-list"),
    path("submissions/<int:submission_id>/status/", views.submission_status_partial, name="submission-status"),
    path("security/audit/", security_views.audit_log_page, name="audit-log"),
    path("security/audit/export.jsonl", security_views.audit_export_download, name="audit-export"),
    path("security/tokens/", security_views.token_list_page, name="token-list"),
    path("security/tokens/new/", security_views.token_create_action, name="token-create"),
    path("security/tokens/<int:token_id>/revoke/", security_views.token_revoke_action, name="token-revoke"),
    path("market/", commerce_views.catalog_page, name="commerce-catalog"),
    path("market/listings/<int:listing_id>/", commerce_views.listing_page, name="commerce-listing"),
    path("market/listings/<int:listing_id>/buy/", commerce_views.purchase_confirm_page, name="commerce-confirm"),
    path("market/listings/<int:listing_id>/purchase/", commerce_views.purchase_action, name="commerce-purchase"),
    path("market/listings/<int:listing_id>/publish/", commerce_views.listing_state_action, {"action": "publish"},
         name="commerce-listing-publish"),
    path("market/listings/<int:listing_id>/retire/", commerce_views.listing_state_action, {"action": "retire"},
         name="commerce-listing-retire"),
    path("market/purchases/", commerce_views.purchases_page, name="commerce-purchases"),
    path("market/models/<int:global_model_id>/download/", commerce_views.download_action, name="commerce-download"),
    path("market/wallet/", commerce_views.wallet_page, name="commerce-wallet"),
    path("market/earnings/", commerce_views.earnings_page, name="commerce-earnings"),
    path("budgets/", budgets_views.budget_index_page, name="budget-index"),
    path("federations/<slug:slug>/budgets/", budgets_views.budget_dashboard_page, name="budget-dashboard"),
    path("federations/<slug:slug>/budgets/ledger/", budgets_views.budget_ledger_page, name="budget-ledger"),
    path("federations/<slug:slug>/budgets/price/", budgets_views.budget_price_action, name="budget-price"),
    path("federations/<slug:slug>/budgets/<int:budget_id>/limit/", budgets_views.budget_limit_action,
         name="budget-limit"),
]
