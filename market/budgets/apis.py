from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from market.audit.services import audit_record
from market.budgets.selectors import (
    budget_get,
    budget_ledger,
    budget_list,
    budget_refusals,
    budget_summary,
    entry_summary,
    ledger_csv,
)
from market.budgets.services import budget_limit_set
from market.federations.selectors import federation_get, federation_require_member
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL


class BudgetUnitOutput(serializers.Serializer):
    unit = serializers.ChoiceField([PARTY_LEVEL, EXAMPLE_LEVEL])
    spent = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    reserved = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)


class BudgetOutput(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField()
    organisation_id = serializers.IntegerField()
    organisation = serializers.CharField()
    epsilon_limit = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    delta = serializers.CharField(help_text="δ at which the composed spend is converted.")
    composed_delta = serializers.CharField(
        help_text="δ of the whole spend: the budget's δ plus the δ of every L2 "
        "submission charged as declared."
    )
    spent = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    reserved = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    remaining = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=True)
    unit = serializers.ChoiceField(
        [PARTY_LEVEL, EXAMPLE_LEVEL],
        help_text="Unit of spent, reserved, remaining and the limit: party-level only while every spend is; "
        "example-level once an L2 submission, a FAug generator or a record-level L1 job is charged (party-level spends then count at "
        "their own ε, which they also guarantee per example).",
    )
    unit_note = serializers.CharField(help_text="A sentence saying what the unit means here.")
    by_unit = BudgetUnitOutput(
        many=True,
        help_text="Each unit's spends composed alone (the same rules, the budget's δ): the party-level "
        "line covers party-level L1 jobs only.",
    )
    used_fraction = serializers.FloatField()
    warning = serializers.BooleanField(
        help_text="Spent and reserved together reach 80 % of the limit."
    )
    composition_rule = serializers.CharField()
    composition = serializers.CharField()
    updated_at = serializers.DateTimeField()


class LimitInput(serializers.Serializer):
    epsilon_limit = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, max_value=999999
    )
    reason = serializers.CharField(max_length=1000, allow_blank=True, default="")


class EntryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    budget_id = serializers.IntegerField()
    organisation_id = serializers.IntegerField()
    organisation = serializers.CharField()
    kind = serializers.CharField(help_text="reserve, charge, release or adjust")
    epsilon = serializers.CharField()
    unit = serializers.CharField()
    delta = serializers.CharField(allow_null=True)
    mechanism = serializers.CharField()
    parameters = serializers.DictField()
    spender_kind = serializers.CharField(
        help_text='What reserved, charged or released the line ("job", "submission", "augmentation", ...); '
        "empty for a limit change."
    )
    spender_id = serializers.IntegerField(allow_null=True, help_text="Its id, within its kind.")
    spender = serializers.CharField(allow_null=True, help_text='Its name, e.g. "Job #3".')
    spender_url = serializers.CharField(allow_null=True, help_text="Its page, where it has one.")
    job_id = serializers.IntegerField(allow_null=True, help_text="spender_id when it is a job.")
    submission_id = serializers.IntegerField(
        allow_null=True, help_text="spender_id when it is an L2 submission."
    )
    augmentation_id = serializers.IntegerField(
        allow_null=True,
        help_text="spender_id when it is an FAug generator (its DP discriminator's spend).",
    )
    actor = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    composition_rule = serializers.CharField()
    spent_after = serializers.CharField()
    reserved_after = serializers.CharField()
    epsilon_limit_after = serializers.CharField()
    created_at = serializers.DateTimeField()


class CsvRenderer(BaseRenderer):
    """Lets ``?format=csv`` through DRF's content negotiation; the view writes the CSV itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, (str, bytes)) else b""


def _federation(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    federation_require_member(federation=federation, user=request.user)
    return federation


class BudgetListApi(APIView):
    @extend_schema(
        responses=BudgetOutput(many=True),
        description="Operators: every silo's budget; a member silo: its own only.",
    )
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        budgets = budget_list(federation=federation, user=request.user)
        return Response(
            BudgetOutput([budget_summary(budget) for budget in budgets], many=True).data
        )


class BudgetDetailApi(APIView):
    @extend_schema(responses=BudgetOutput)
    def get(self, request, budget_id):
        return Response(
            BudgetOutput(budget_summary(budget_get(budget_id=budget_id, user=request.user))).data
        )

    @extend_schema(
        request=LimitInput,
        responses=BudgetOutput,
        description="Operators set a silo's ε limit (audited); below the current spend is a 409.",
    )
    def patch(self, request, budget_id):
        budget_get(budget_id=budget_id, user=request.user)
        given = LimitInput(data=request.data)
        given.is_valid(raise_exception=True)
        budget = budget_limit_set(
            budget_id=budget_id, actor=request.user, request=request, **given.validated_data
        )
        return Response(BudgetOutput(budget_summary(budget)).data)


class BudgetLedgerApi(APIView):
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        responses={200: EntryOutput(many=True), (200, "text/csv"): OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("silo", int, description="Organisation id"),
            OpenApiParameter("job", int),
            OpenApiParameter("kind", str, description="reserve, charge, release or adjust"),
            OpenApiParameter("since", str, description="YYYY-MM-DD or ISO 8601, inclusive"),
            OpenApiParameter("until", str, description="YYYY-MM-DD or ISO 8601, inclusive"),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
    )
    def get(self, request, slug):
        federation = federation_get(slug=slug, user=request.user)
        filters = {
            name: request.query_params.get(name)
            for name in ("silo", "job", "kind", "since", "until")
        }
        entries = budget_ledger(federation=federation, user=request.user, **filters)
        if request.accepted_renderer.format == "csv":
            response = HttpResponse(
                ledger_csv(entries, user=request.user, federation=federation),
                content_type="text/csv; charset=utf-8",
            )
            response["Content-Disposition"] = f'attachment; filename="{slug}-privacy-ledger.csv"'
            audit_record(
                action="budget.ledger_exported",
                actor=request.user,
                target=federation,
                request=request,
                details={"filters": {name: value for name, value in filters.items() if value}},
            )
            return response
        entries = entries[:1000]
        return Response(
            EntryOutput(
                [
                    entry_summary(entry, user=request.user, federation=federation)
                    for entry in entries
                ],
                many=True,
            ).data
        )


class RefusalOutput(serializers.Serializer):
    at = serializers.DateTimeField()
    message = serializers.CharField()
    actor = serializers.CharField(allow_null=True)


class BudgetRefusalListApi(APIView):
    @extend_schema(
        responses=RefusalOutput(many=True),
        description="Recent spends refused for lack of budget (from the audit log), newest first; a silo "
        "sees those that named its budget or that it asked for.",
    )
    def get(self, request, slug):
        federation = _federation(request, slug)
        return Response(
            RefusalOutput(budget_refusals(federation=federation, user=request.user), many=True).data
        )
