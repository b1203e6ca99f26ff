from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.response import Response
from rest_framework.views import APIView

from market.accounts.selectors import user_profile

ProfileSerializer = inline_serializer("Profile", {
    "username": serializers.CharField(),
    "is_operator": serializers.BooleanField(),
    "organisation": inline_serializer("ProfileOrganisation", {
        "id": serializers.IntegerField(), "name": serializers.CharField(),
        "is_silo": serializers.BooleanField(), "is_buyer": serializers.BooleanField()}, allow_null=True),
})


class TokenApi(ObtainAuthToken):
    """Exchange a username and password for the API token to send as ``Authorization: Token <key>``."""


class ProfileApi(APIView):
    @extend_schema(responses=ProfileSerializer)
    def get(self, request):
        return Response(user_profile(user=request.user))
