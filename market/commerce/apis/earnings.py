"""The API of a silo's earnings: its revenue shares and contribution values, and the payouts an operator records."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.apis.wallets import WalletEntryOutput
from market.commerce.money import payouts_of
from market.commerce.payouts import payable_cents, payout_record
from market.commerce.selectors import (
    earnings_for,
    earnings_organisation,
    organisation_get,
)
from market.commerce.services import (
    require_operator,
)
from market.jobs.visibility import own_contribution_values


class PayoutInput(serializers.Serializer):
    amount_cents = serializers.IntegerField(min_value=1)
    reference = serializers.CharField(
        max_length=200,
        help_text="The reference of the payment made outside the app; posting it again is harmless.",
    )
    note = serializers.CharField(max_length=500, allow_blank=True, default="")


class PayoutApi(APIView):
    @extend_schema(request=PayoutInput, responses={201: WalletEntryOutput, 200: WalletEntryOutput})
    def post(self, request, organisation_id):
        """Operators: record a payout of a silo's earnings made outside the app (at most what it earned and has
        not been paid). 201 when recorded, 200 when this reference was already recorded."""
        require_operator(request.user, "record payouts")  # before the lookup: no probing ids
        given = PayoutInput(data=request.data)
        given.is_valid(raise_exception=True)
        organisation = organisation_get(organisation_id=organisation_id)
        entry, created = payout_record(
            organisation=organisation, actor=request.user, request=request, **given.validated_data
        )
        return Response(
            WalletEntryOutput(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class EarningsQuery(serializers.Serializer):
    organisation = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


class EarningsApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("organisation", int, description="Operators only.")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        """Your organisation's revenue shares: total, per listing and per purchase; and its own contribution value
        in each global model it went into at L0, with the value's standard error and rank band (never another
        silo's)."""
        given = EarningsQuery(data=request.query_params)
        given.is_valid(raise_exception=True)
        organisation = earnings_organisation(
            user=request.user, organisation_id=given.validated_data.get("organisation")
        )
        return Response(
            {
                "organisation": organisation.id,
                **earnings_for(organisation=organisation),
                "contribution_values": own_contribution_values(organisation_id=organisation.id),
                "payable_cents": payable_cents(organisation=organisation),
                "payouts": WalletEntryOutput(payouts_of(organisation=organisation), many=True).data,
            }
        )
