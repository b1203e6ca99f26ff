"""The typed body of every webhook event, for the OpenAPI schema (market.webhooks.events writes them)."""

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from market.webhooks.models import WebhookEventType as Type


class SubmissionData(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField()
    status = serializers.CharField()
    rejection_reason = serializers.CharField()


class JobData(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField()
    kind = serializers.CharField()
    privacy_level = serializers.CharField()
    status = serializers.CharField()
    failure_reason = serializers.CharField()
    global_model = serializers.IntegerField(allow_null=True)


class ListingData(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    federation = serializers.SlugField()
    global_model = serializers.IntegerField()
    price_cents = serializers.IntegerField()
    status = serializers.CharField()


class PurchaseData(serializers.Serializer):
    id = serializers.IntegerField()
    listing = serializers.IntegerField()
    global_model = serializers.IntegerField()
    price_cents = serializers.IntegerField()


class SaleData(serializers.Serializer):
    purchase = serializers.IntegerField()
    listing = serializers.IntegerField()
    global_model = serializers.IntegerField()
    organisation = serializers.IntegerField(help_text="The credited organisation (the receiver)")
    amount_cents = serializers.IntegerField(help_text="The share credited, in cents, positive")


class BudgetData(serializers.Serializer):
    id = serializers.IntegerField()
    federation = serializers.SlugField()
    epsilon_limit = serializers.CharField(help_text="ε, a decimal string")
    spent = serializers.CharField(help_text="ε spent, a decimal string")
    reserved = serializers.CharField(help_text="ε reserved, a decimal string")
    spent_fraction = serializers.FloatField(help_text="spent ÷ limit")


class ChargeData(serializers.Serializer):
    epsilon = serializers.CharField(help_text="ε charged, a decimal string")
    delta = serializers.CharField(allow_null=True, help_text="δ of the charge, a decimal string")
    unit = serializers.CharField(help_text="example-level or party-level")
    job = serializers.IntegerField(allow_null=True)
    submission = serializers.IntegerField(allow_null=True)


class PayoutData(serializers.Serializer):
    id = serializers.CharField()
    organisation = serializers.IntegerField()
    amount_cents = serializers.IntegerField(allow_null=True)


class UsageData(serializers.Serializer):
    charge = serializers.IntegerField()
    listing = serializers.IntegerField()
    global_model = serializers.IntegerField()
    rows = serializers.IntegerField()
    free_rows = serializers.IntegerField()
    amount_cents = serializers.IntegerField(
        help_text="The call's whole charge, its rows and any month's fee"
    )
    monthly_fee_cents = serializers.IntegerField(
        help_text="The plan's monthly fee paid by this call (the first call of a later month), else 0"
    )
    month_rows = serializers.IntegerField()
    remaining_cap_rows = serializers.IntegerField(allow_null=True)


class MembershipData(serializers.Serializer):
    federation = serializers.SlugField()
    organisation = serializers.IntegerField()
    change = serializers.ChoiceField(["requested", "joined", "admitted", "refused", "removed"])


def _body(name: str, data_fields: dict) -> type[serializers.Serializer]:
    """A delivery body: the common envelope with this event's ``data``."""
    fields = {
        "id": serializers.UUIDField(help_text="The delivery's id, also sent as Onefold-Delivery."),
        "type": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "data": type(f"{name}Data", (serializers.Serializer,), data_fields)(),
    }
    return type(f"{name}Event", (serializers.Serializer,), fields)


EVENT_BODIES = {
    Type.SUBMISSION_VALIDATED: _body("SubmissionValidated", {"submission": SubmissionData()}),
    Type.SUBMISSION_REJECTED: _body("SubmissionRejected", {"submission": SubmissionData()}),
    Type.JOB_SUCCEEDED: _body("JobSucceeded", {"job": JobData()}),
    Type.JOB_FAILED: _body("JobFailed", {"job": JobData()}),
    Type.JOB_CANCELLED: _body("JobCancelled", {"job": JobData()}),
    Type.MODEL_PUBLISHED: _body("ModelPublished", {"listing": ListingData()}),
    Type.MODEL_RETIRED: _body("ModelRetired", {"listing": ListingData()}),
    Type.PURCHASE_COMPLETED: _body("PurchaseCompleted", {"purchase": PurchaseData()}),
    Type.SALE_CREDITED: _body("SaleCredited", {"sale": SaleData()}),
    Type.BUDGET_CHARGED: _body("BudgetCharged", {"budget": BudgetData(), "charge": ChargeData()}),
    Type.BUDGET_THRESHOLD_REACHED: _body(
        "BudgetThresholdReached",
        {"budget": BudgetData(), "threshold": serializers.FloatField(help_text="0.8 or 1.0")},
    ),
    Type.PAYOUT_RECORDED: _body("PayoutRecorded", {"payout": PayoutData()}),
    Type.USAGE_CHARGED: _body("UsageCharged", {"usage": UsageData()}),
    Type.USAGE_CAP_REACHED: _body("UsageCapReached", {"usage": UsageData()}),
    Type.MEMBERSHIP_REQUESTED: _body("MembershipRequested", {"membership": MembershipData()}),
    Type.MEMBERSHIP_CHANGED: _body("MembershipChanged", {"membership": MembershipData()}),
    Type.WEBHOOK_PING: _body("WebhookPing", {"endpoint": serializers.IntegerField()}),
}

WebhookEventBody = PolymorphicProxySerializer(
    component_name="WebhookEventBody",
    serializers={str(event_type): body for event_type, body in EVENT_BODIES.items()},
    resource_type_field_name="type",
)
