"""The dry-run price of an L1 job (``budget-price``) and its calibration (``budget-calibration``): the job's
parameters are checked and completed as :func:`market.jobs.services.job_create` would (:mod:`market.jobs.pricing`),
then priced by the budgets; nothing is reserved. A silo sees its own line only."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from market.budgets.selectors import price_quote_visible
from market.federations.selectors import federation_get, federation_require_member
from market.jobs.parameters import job_kind_get, job_kind_priced_default
from market.jobs.pricing import job_price_calibration, job_price_quote
from market.jobs.privacy_costs import submission_silos


def _federation(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    federation_require_member(federation=federation, user=request.user)
    return federation


class PrivacyParametersInput(serializers.Serializer):
    mechanism = serializers.ChoiceField(["laplace", "gaussian"], required=False)
    gamma = serializers.FloatField(allow_null=True, required=False)
    sigma = serializers.FloatField(allow_null=True, required=False)
    delta = serializers.FloatField(required=False)
    n_queries = serializers.IntegerField(
        min_value=0,
        max_value=1_000_000_000,
        required=False,
        help_text="Public rows queried: the job's 'query_count' when 'parameters' names no query.",
    )


class PriceInput(serializers.Serializer):
    submissions = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        max_length=10_000,
        help_text="Ids of the submissions the job would use: each silo is priced for the s votes each of its "
        "submissions moves (k submissions: k·s). Takes precedence over 'organisations'.",
    )
    organisations = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        max_length=10_000,
        help_text="Organisation ids, one per submission the job would use (a silo listed twice is priced for 2·s "
        "votes); every member once when both lists are left out.",
    )
    kind = serializers.CharField(
        default=job_kind_priced_default,
        help_text="The job kind priced: one that adds server noise at L1 (default: the first such kind).",
    )
    parameters = serializers.DictField(
        required=False,
        default=dict,
        help_text="The job's parameters, as for POST /api/jobs/: the kind's engine checks them and fills in its "
        "defaults, so the quote is the price of that job.",
    )
    privacy = PrivacyParametersInput(required=False)
    partitions = serializers.IntegerField(
        required=False, help_text="FedKT's s: the same as parameters.partitions."
    )
    teachers = serializers.IntegerField(
        required=False, help_text="FedKT's t: the same as parameters.teachers."
    )
    vote_weight = serializers.IntegerField(
        required=False,
        help_text="The largest integer vote weight: above 1, the same as parameters "
        '{"vote": "class_weighted", "vote_weight_max": W} (each submission moves s × W votes).',
    )


class CalibrationInput(PriceInput):
    solve_for = serializers.ChoiceField(["noise", "queries"])


def _organisations(federation, request, given, *, own_only: bool = False) -> list[int]:
    """The silo of each submission to price: those of the submissions asked for, else the organisations asked for
    (operators may name any member), else every member once. ``own_only``: a non-operator's own silo only."""
    if "submissions" in given:
        silos = submission_silos(
            federation=federation,
            submission_ids=given["submissions"],
            organisation_id=None if request.user.is_operator else request.user.organisation_id,
        )
    else:
        silos = given.get("organisations", list(federation.members.values_list("id", flat=True)))
    if own_only and not request.user.is_operator:
        return [silo for silo in silos if silo == request.user.organisation_id] or [
            request.user.organisation_id
        ]
    return silos


#: The price API's shorthand fields that stand for job parameters of the same name (FedKT's s and t, the names
#: its privacy report gives them).
SHORTHAND_FIELDS = ("partitions", "teachers")


def _job_parameters(data: dict) -> dict:
    """The job's parameters: ``parameters``, with FedKT's shorthand fields (s, t, the largest vote weight W) where
    given; the engine checks them all (market.jobs.pricing) and says what a vote weight stands for."""
    shorthand = {name: data[name] for name in SHORTHAND_FIELDS if name in data}
    if data.get("vote_weight", 1) != 1:
        algorithm = job_kind_get(data["kind"])
        if algorithm.accepts_noise:  # any other kind is refused at L1 whatever its parameters
            shorthand |= algorithm.vote_weight_parameters(data["vote_weight"])
    return {**shorthand, **data["parameters"]}


class BudgetPriceApi(APIView):
    @extend_schema(
        request=PriceInput,
        responses={200: OpenApiTypes.OBJECT},
        description="Dry run: what an L1 job would cost each silo, its parameters checked and completed as the job's "
        "would be; nothing is reserved. "
        "A silo sees its own line only, and whether the job fits its own budget.",
    )
    def post(self, request, slug):
        federation = _federation(request, slug)
        given = PriceInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        quote = job_price_quote(
            federation=federation,
            organisations=_organisations(federation, request, data),
            kind=data["kind"],
            parameters=_job_parameters(data),
            privacy=data.get("privacy"),
        )
        return Response(price_quote_visible(quote=quote, user=request.user))


class BudgetCalibrationApi(APIView):
    @extend_schema(
        request=CalibrationInput,
        responses={200: OpenApiTypes.OBJECT},
        description="The least noise (largest γ, smallest σ) or the most queries that fit every silo.",
    )
    def post(self, request, slug):
        federation = _federation(request, slug)
        given = CalibrationInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        # A silo calibrates against its own budget only: the answer for several silos would reveal their remainders.
        result = job_price_calibration(
            federation=federation,
            organisations=_organisations(federation, request, data, own_only=True),
            kind=data["kind"],
            parameters=_job_parameters(data),
            privacy=data.get("privacy"),
            solve_for=data["solve_for"],
        )
        return Response(result)
