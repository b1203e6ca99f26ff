"""The operator's money page as an API: the market's fees, every sale with its fee, every organisation's wallet
totals (searchable), and one organisation's ledger filtered by kind or searched. Reads market.commerce.money, as
the page does; amounts are integer cents, as in every wallet API."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.apis.pagination import CatalogPagination
from market.commerce.apis.wallets import WalletEntryOutput
from market.commerce.models import WalletEntryKind
from market.commerce.money import (
    ledger_entries,
    market_fees,
    organisations_with_money,
    sales_with_fees,
)
from market.commerce.selectors import organisation_get
from market.commerce.services import require_operator


class MarketFeesOutput(serializers.Serializer):
    total_fee_cents = serializers.IntegerField(help_text="Fees of sales and of metered use.")
    sales = serializers.IntegerField()
    total_sold_cents = serializers.IntegerField()
    balance_cents = serializers.IntegerField(help_text="The market wallet's balance.")
    usage_calls = serializers.IntegerField(help_text="Metered prediction calls charged.")
    usage_revenue_cents = serializers.IntegerField(help_text="What metered use charged buyers.")
    usage_fee_cents = serializers.IntegerField(help_text="The market's fees of metered use.")


class SaleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    listing = serializers.IntegerField(source="listing_id")
    listing_name = serializers.CharField(source="listing.name")
    buyer_organisation = serializers.IntegerField(source="buyer_organisation_id")
    buyer_organisation_name = serializers.CharField(source="buyer_organisation.name")
    price_cents = serializers.IntegerField()
    fee_cents = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class OrganisationMoneyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    balance_cents = serializers.IntegerField(source="balance")
    topped_up_cents = serializers.IntegerField(source="topped_up")
    spent_cents = serializers.IntegerField(source="spent", help_text="Negative: purchases.")
    spent_on_use_cents = serializers.IntegerField(
        source="spent_on_use", help_text="Negative: metered predictions."
    )
    earned_cents = serializers.IntegerField(source="earned")
    paid_out_cents = serializers.IntegerField(source="paid_out", help_text="Negative: payouts.")


class SearchQuery(serializers.Serializer):
    search = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class LedgerQuery(SearchQuery):
    kind = serializers.ChoiceField(choices=WalletEntryKind.choices, required=False, default="")


def _page(request, rows, output) -> Response:
    paginator = CatalogPagination()
    page = paginator.paginate_queryset(rows, request)
    return paginator.get_paginated_response(output(page, many=True).data)


class MarketFeesApi(APIView):
    @extend_schema(responses=MarketFeesOutput)
    def get(self, request):
        """Operators: the fees the market kept, from how many sales, out of how much sold."""
        return Response(MarketFeesOutput(market_fees(user=request.user)).data)


class SalesApi(APIView):
    pagination_class = CatalogPagination

    @extend_schema(responses=SaleOutput(many=True))
    def get(self, request):
        """Operators: every sale with its price and the market's fee, newest first (paginated)."""
        return _page(request, sales_with_fees(user=request.user), SaleOutput)


class OrganisationsMoneyApi(APIView):
    pagination_class = CatalogPagination

    @extend_schema(
        parameters=[OpenApiParameter("search", str, description="Words in the name.")],
        responses=OrganisationMoneyOutput(many=True),
    )
    def get(self, request):
        """Operators: every organisation's balance and ledger totals by kind, by name (paginated)."""
        require_operator(request.user, "read the market's money")  # before reading the query
        given = SearchQuery(data=request.query_params)
        given.is_valid(raise_exception=True)
        rows = organisations_with_money(user=request.user, search=given.validated_data["search"])
        return _page(request, rows, OrganisationMoneyOutput)


class OrganisationLedgerApi(APIView):
    pagination_class = CatalogPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", str, enum=WalletEntryKind.values),
            OpenApiParameter("search", str, description="Words in the reference, note or listing."),
        ],
        responses=WalletEntryOutput(many=True),
    )
    def get(self, request, organisation_id):
        """Operators: one organisation's ledger, newest first, of one kind or searched (paginated)."""
        require_operator(
            request.user, "read the market's money"
        )  # before the lookup: no probing ids
        given = LedgerQuery(data=request.query_params)
        given.is_valid(raise_exception=True)
        organisation = organisation_get(organisation_id=organisation_id)
        rows = ledger_entries(user=request.user, organisation=organisation, **given.validated_data)
        return _page(request, rows, WalletEntryOutput)
