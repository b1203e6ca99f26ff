from django.urls import path

from market.invitations import apis

urlpatterns = [
    path("invitations/", apis.InvitationListApi.as_view(), name="api-invitation-list"),
    path(
        "invitations/<int:invitation_id>/revoke/",
        apis.InvitationRevokeApi.as_view(),
        name="api-invitation-revoke",
    ),
    path(
        "invitations/accept/<str:token>/",
        apis.InvitationAcceptApi.as_view(),
        name="api-invitation-accept",
    ),
]
