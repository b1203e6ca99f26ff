"""The API of pricing plans and metered use: a listing's plans (operators add them), and a buyer's use of its
predictions-only purchases this month."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.plan_models import PlanKind
from market.commerce.plans import plan_create, plans_visible
from market.commerce.selectors import listing_get
from market.commerce.services import require_operator
from market.commerce.usage import usage_summaries


class PlanOutput(serializers.Serializer):
    id = serializers.IntegerField()
    listing = serializers.IntegerField(source="listing_id")
    name = serializers.CharField()
    kind = serializers.ChoiceField(PlanKind.choices)
    flat_price_cents = serializers.IntegerField()
    monthly_fee_cents = serializers.IntegerField()
    price_per_thousand_rows_cents = serializers.IntegerField()
    monthly_cap_rows = serializers.IntegerField(allow_null=True)
    trial_rows = serializers.IntegerField()
    trial_days = serializers.IntegerField()
    private_organisation = serializers.IntegerField(
        source="private_organisation_id",
        allow_null=True,
        help_text="A private offer's organisation (only it and operators see the plan).",
    )
    created_at = serializers.DateTimeField()


class PlanInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(PlanKind.choices)
    flat_price_cents = serializers.IntegerField(default=0, min_value=0, max_value=10**12)
    monthly_fee_cents = serializers.IntegerField(default=0, min_value=0, max_value=10**12)
    price_per_thousand_rows_cents = serializers.IntegerField(
        default=0, min_value=0, max_value=10**12
    )
    monthly_cap_rows = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=10**12
    )
    trial_rows = serializers.IntegerField(default=0, min_value=0, max_value=10**12)
    trial_days = serializers.IntegerField(default=0, min_value=0, max_value=366)
    private_organisation_id = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=2**63 - 1
    )


class PlanListApi(APIView):
    @extend_schema(responses=PlanOutput(many=True))
    def get(self, request, listing_id):
        """The listing's pricing plans you may see: public ones and private offers to your organisation."""
        listing = listing_get(listing_id=listing_id, user=request.user)
        return Response(
            PlanOutput(plans_visible(listing=listing, user=request.user), many=True).data
        )

    @extend_schema(request=PlanInput, responses={201: PlanOutput})
    def post(self, request, listing_id):
        """Operators: add a pricing plan (flat or usage-based, with a trial; public or a private offer)."""
        listing = listing_get(listing_id=listing_id, user=request.user)
        require_operator(request.user, "add pricing plans")  # before validation: no probing
        given = PlanInput(data=request.data)
        given.is_valid(raise_exception=True)
        plan = plan_create(
            listing=listing, actor=request.user, request=request, **given.validated_data
        )
        return Response(PlanOutput(plan).data, status=status.HTTP_201_CREATED)


class UsageOutput(serializers.Serializer):
    purchase = serializers.IntegerField()
    organisation = serializers.IntegerField()
    listing = serializers.IntegerField()
    listing_name = serializers.CharField()
    global_model = serializers.IntegerField()
    plan = serializers.IntegerField(allow_null=True)
    period = serializers.DateField(help_text="The first day of this calendar month (UTC).")
    month_rows = serializers.IntegerField()
    month_calls = serializers.IntegerField()
    month_charged_cents = serializers.IntegerField()
    day_rows = serializers.IntegerField()
    monthly_cap_rows = serializers.IntegerField(allow_null=True)
    remaining_cap_rows = serializers.IntegerField(allow_null=True)
    trial_rows_left = serializers.IntegerField()
    trial_ends_at = serializers.DateTimeField(allow_null=True)


class UsageApi(APIView):
    @extend_schema(responses=UsageOutput(many=True))
    def get(self, request):
        """Your organisation's predictions-only purchases: this month's rows, charges, and the trial and cap
        left (operators: every organisation's)."""
        return Response(UsageOutput(usage_summaries(user=request.user), many=True).data)
