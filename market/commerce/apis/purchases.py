"""The API of purchases: buying a listing (with one of its plans) and the organisation's purchases."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.apis.pagination import CatalogPagination
from market.commerce.purchases import listing_for_purchase, purchase_create
from market.commerce.selectors import (
    listing_get,
    purchase_list,
)


class PurchaseOutput(serializers.Serializer):
    id = serializers.IntegerField()
    listing = serializers.IntegerField(source="listing_id")
    listing_name = serializers.CharField(source="listing.name")
    global_model = serializers.IntegerField(source="global_model_id")
    buyer_organisation = serializers.CharField(source="buyer_organisation.name")
    plan = serializers.IntegerField(source="plan_id", allow_null=True)
    price_cents = serializers.IntegerField()
    fee_cents = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class PurchaseInput(serializers.Serializer):
    plan = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=2**63 - 1,
        help_text="The pricing plan to buy; required where the listing has plans you can see.",
    )


class PurchaseCreatedOutput(PurchaseOutput):
    api_token = serializers.CharField(
        allow_null=True,
        help_text="Predictions-only listings: the key of an API token that calls only this model's predict "
        "endpoint, shown once (null on a replay and for downloads).",
    )


class ListingPurchaseApi(APIView):
    @extend_schema(
        request=PurchaseInput,
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        responses={201: PurchaseCreatedOutput},
    )
    def post(self, request, listing_id):
        """Buy a listing (with one of its plans, where it has some); a repeated Idempotency-Key returns the first
        purchase (header Idempotent-Replayed)."""
        listing_get(listing_id=listing_id, user=request.user)
        given = PurchaseInput(data=request.data)
        given.is_valid(raise_exception=True)
        result = purchase_create(
            listing=listing_for_purchase(listing_id=listing_id),
            user=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            plan_id=given.validated_data["plan"],
            request=request,
        )
        result.purchase.api_token = result.api_token_key
        response = Response(
            PurchaseCreatedOutput(result.purchase).data, status=status.HTTP_201_CREATED
        )
        response["Idempotent-Replayed"] = "true" if result.replayed else "false"
        return response


class PurchaseListApi(APIView):
    pagination_class = CatalogPagination

    @extend_schema(
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses=PurchaseOutput(many=True),
    )
    def get(self, request):
        """Your organisation's purchases, newest first (operators: everyone's)."""
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(purchase_list(user=request.user), request, view=self)
        return paginator.get_paginated_response(PurchaseOutput(page, many=True).data)
