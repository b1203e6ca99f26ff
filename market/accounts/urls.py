from django.urls import path

from market.accounts.apis import ProfileApi, TokenApi, TokenListApi, TokenRevokeApi

urlpatterns = [
    path("auth/token/", TokenApi.as_view(), name="api-token"),
    path("auth/tokens/", TokenListApi.as_view(), name="api-token-list"),
    path("auth/tokens/<int:token_id>/revoke/", TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("me/", ProfileApi.as_view(), name="api-me"),
]
