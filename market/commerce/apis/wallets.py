"""The API of wallets: an organisation's balance and ledger, and the operator's top-ups."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.apis.pagination import CatalogPagination
from market.commerce.models import WalletEntryKind
from market.commerce.selectors import (
    organisation_get,
    wallet_for,
)
from market.commerce.services import (
    require_operator,
)
from market.commerce.wallets import wallet_top_up


class WalletEntryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(WalletEntryKind.choices)
    amount_cents = serializers.IntegerField()
    balance_after_cents = serializers.IntegerField()
    reference = serializers.CharField()
    purchase = serializers.IntegerField(source="purchase_id", allow_null=True)
    note = serializers.CharField()
    created_at = serializers.DateTimeField()


def wallet_response(request, organisation_id):
    organisation, balance_cents, entries = wallet_for(
        user=request.user, organisation_id=organisation_id
    )
    paginator = CatalogPagination()
    page = paginator.paginate_queryset(entries, request)
    return Response(
        {
            "organisation": organisation.id,
            "organisation_name": organisation.name,
            "balance_cents": balance_cents,
            "count": paginator.count,
            "entries": WalletEntryOutput(page, many=True).data,
        }
    )


class WalletApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        """Your organisation's balance and ledger (newest first, paginated)."""
        return wallet_response(request, None)


class OrganisationWalletApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, organisation_id):
        """An organisation's balance and ledger: your own, or any for operators."""
        return wallet_response(request, organisation_id)


class TopUpInput(serializers.Serializer):
    amount_cents = serializers.IntegerField(min_value=1)
    reference = serializers.CharField(
        max_length=200, help_text="The payment's reference; posting it again is harmless."
    )
    note = serializers.CharField(max_length=500, allow_blank=True, default="")


class TopUpApi(APIView):
    @extend_schema(request=TopUpInput, responses={201: WalletEntryOutput, 200: WalletEntryOutput})
    def post(self, request, organisation_id):
        """Operators: credit a wallet. 201 when credited, 200 when this reference was already credited."""
        require_operator(
            request.user, "top up wallets"
        )  # before the lookup: no probing organisation ids
        given = TopUpInput(data=request.data)
        given.is_valid(raise_exception=True)
        organisation = organisation_get(organisation_id=organisation_id)
        entry, created = wallet_top_up(
            organisation=organisation, actor=request.user, request=request, **given.validated_data
        )
        return Response(
            WalletEntryOutput(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
