from django.urls import path

from market.accounts.apis import ProfileApi, TokenApi

urlpatterns = [
    path("auth/token/", TokenApi.as_view(), name="api-token"),
    path("me/", ProfileApi.as_view(), name="api-me"),
]
