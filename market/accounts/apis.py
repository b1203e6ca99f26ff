from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from market.accounts.selectors import api_token_list, api_token_state, user_profile
from market.accounts.services import SignInLocked, api_sign_in, api_token_create, api_token_revoke
from market.errors import InvalidInput

ProfileSerializer = inline_serializer(
    "Profile",
    {
        "username": serializers.CharField(),
        "is_operator": serializers.BooleanField(),
        "organisation": inline_serializer(
            "ProfileOrganisation",
            {
                "id": serializers.IntegerField(),
                "name": serializers.CharField(),
                "is_silo": serializers.BooleanField(),
                "is_buyer": serializers.BooleanField(),
            },
            allow_null=True,
        ),
    },
)


class TokenOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    key_prefix = serializers.CharField()
    state = serializers.ChoiceField(["active", "expired", "revoked"])
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)


class NewTokenOutput(TokenOutput):
    token = serializers.CharField(
        help_text="The key; send it as 'Authorization: Token <key>'. It is shown only once."
    )


class SignInInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, style={"input_type": "password"}
    )
    name = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="A name for the new token; by default the date of the sign-in.",
    )


class TokenInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Lifetime; by default the market's standard token lifetime.",
    )


def token_as_dict(token, key: str | None = None) -> dict:
    data = {
        "id": token.id,
        "name": token.name,
        "key_prefix": token.key_prefix,
        "state": api_token_state(token),
        "created_at": token.created_at,
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
        "last_used_at": token.last_used_at,
    }
    return data if key is None else {**data, "token": key}


class TokenApi(APIView):
    """Exchange a username and password for a new named API token (``Authorization: Token <key>``).

    Failed attempts are limited per account and per address; past the limit the answer is 429 with Retry-After.
    """

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(request=SignInInput, responses={200: NewTokenOutput})
    def post(self, request):
        body = SignInInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            token, key = api_sign_in(
                username=body.validated_data["username"],
                password=body.validated_data["password"],
                token_name=body.validated_data["name"],
                request=request,
            )
        except SignInLocked as locked:
            raise Throttled(wait=locked.retry_after, detail=str(locked)) from locked
        except (
            InvalidInput
        ) as refused:  # the wording and shape DRF's ObtainAuthToken used, which clients parse
            return Response(
                {"non_field_errors": [str(refused)]}, status=status.HTTP_400_BAD_REQUEST
            )
        return Response(token_as_dict(token, key))


class TokenListApi(APIView):
    """Your own API tokens (never their keys), newest first; POST creates a named token and shows its key once."""

    @extend_schema(responses={200: TokenOutput(many=True)})
    def get(self, request):
        return Response([token_as_dict(token) for token in api_token_list(user=request.user)])

    @extend_schema(request=TokenInput, responses={201: NewTokenOutput})
    def post(self, request):
        body = TokenInput(data=request.data)
        body.is_valid(raise_exception=True)
        token, key = api_token_create(
            user=request.user,
            name=body.validated_data["name"],
            expires_in_days=body.validated_data.get("expires_in_days"),
            request=request,
        )
        return Response(token_as_dict(token, key), status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    """Revoke one of your tokens; it stops working at once. Someone else's token id answers 404."""

    @extend_schema(request=None, responses={200: TokenOutput})
    def post(self, request, token_id: int):
        return Response(
            token_as_dict(api_token_revoke(user=request.user, token_id=token_id, request=request))
        )


class ProfileApi(APIView):
    @extend_schema(responses=ProfileSerializer)
    def get(self, request):
        return Response(user_profile(user=request.user))
