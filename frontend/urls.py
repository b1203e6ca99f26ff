from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import security_views, views
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
]
