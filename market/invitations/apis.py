from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from market.accounts.services import api_token_create
from market.federations.selectors import federation_get
from market.invitations.models import InvitationKind
from market.invitations.selectors import (
    InvitationLookupsLimited,
    invitation_for_token,
    invitation_list,
    invitation_state,
)
from market.invitations.services import (
    INVITATION_MAX_DAYS,
    invitation_accept,
    invitation_create,
    invitation_revoke,
)


class InvitationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(InvitationKind.choices)
    organisation = serializers.CharField(source="organisation_label")
    is_silo = serializers.BooleanField()
    is_buyer = serializers.BooleanField()
    federation = serializers.SlugField(source="federation.slug", allow_null=True)
    email = serializers.CharField()
    state = serializers.SerializerMethodField()
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    accepted_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.ChoiceField(["open", "accepted", "revoked", "expired"]))
    def get_state(self, invitation) -> str:
        return invitation_state(invitation)


class NewInvitationOutput(InvitationOutput):
    link = serializers.URLField(help_text="The invitation link; it is shown only once.")


class InvitationInput(serializers.Serializer):
    kind = serializers.ChoiceField(InvitationKind.choices)
    organisation_name = serializers.CharField(
        max_length=200, required=False, default="", help_text="kind 'organisation'"
    )
    is_silo = serializers.BooleanField(required=False, default=False)
    is_buyer = serializers.BooleanField(required=False, default=False)
    organisation_id = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="kind 'person'"
    )
    federation = serializers.SlugField(
        required=False,
        allow_blank=True,
        default="",
        help_text="A federation the (silo) organisation becomes a member of on acceptance.",
    )
    email = serializers.CharField(max_length=254, required=False, allow_blank=True, default="")
    expires_in_days = serializers.IntegerField(
        required=False, min_value=1, max_value=INVITATION_MAX_DAYS
    )


class InvitationOfferOutput(serializers.Serializer):
    kind = serializers.ChoiceField(InvitationKind.choices)
    organisation = serializers.CharField(source="organisation_label")
    federation = serializers.CharField(source="federation.name", allow_null=True)
    expires_at = serializers.DateTimeField()


class AcceptInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, style={"input_type": "password"}
    )


class AcceptedOutput(serializers.Serializer):
    username = serializers.CharField()
    organisation = serializers.CharField()
    token = serializers.CharField(
        help_text="An API token for the new person ('Authorization: Token <key>'); shown once."
    )


def invitation_as_dict(invitation, link: str | None = None) -> dict:
    data = InvitationOutput(invitation).data
    return data if link is None else {**data, "link": link}


def invitation_link(request, token: str) -> str:
    return request.build_absolute_uri(reverse("invitation-accept", args=[token]))


class InvitationListApi(APIView):
    """Operators: every invitation, newest first (never its link); POST makes one and shows its link once."""

    @extend_schema(responses=InvitationOutput(many=True))
    def get(self, request):
        return Response(
            [invitation_as_dict(invitation) for invitation in invitation_list(user=request.user)]
        )

    @extend_schema(request=InvitationInput, responses={201: NewInvitationOutput})
    def post(self, request):
        given = InvitationInput(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        slug = fields.pop("federation")
        invitation, token = invitation_create(
            user=request.user,
            federation=federation_get(slug=slug, user=request.user) if slug else None,
            request=request,
            **fields,
        )
        return Response(
            invitation_as_dict(invitation, invitation_link(request, token)),
            status=status.HTTP_201_CREATED,
        )


class InvitationRevokeApi(APIView):
    @extend_schema(request=None, responses=InvitationOutput)
    def post(self, request, invitation_id: int):
        invitation = invitation_revoke(
            invitation_id=invitation_id, user=request.user, request=request
        )
        return Response(invitation_as_dict(invitation))


class InvitationAcceptApi(APIView):
    """Anyone with the link: GET says what the invitation offers; POST chooses a username and password, uses the
    invitation up and answers an API token. An unknown token is 404; a used, withdrawn or expired one 410."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(responses=InvitationOfferOutput)
    def get(self, request, token: str):
        try:
            invitation = invitation_for_token(token=token, request=request)
        except InvitationLookupsLimited as limited:
            raise Throttled(wait=limited.retry_after, detail=str(limited)) from limited
        return Response(InvitationOfferOutput(invitation).data)

    @extend_schema(request=AcceptInput, responses={201: AcceptedOutput})
    def post(self, request, token: str):
        given = AcceptInput(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            person = invitation_accept(token=token, request=request, **given.validated_data)
        except InvitationLookupsLimited as limited:
            raise Throttled(wait=limited.retry_after, detail=str(limited)) from limited
        _, key = api_token_create(user=person, name="invitation", request=request)
        return Response(
            {"username": person.username, "organisation": person.organisation.name, "token": key},
            status=status.HTTP_201_CREATED,
        )
