"""Pricing plans of a listing and the metered use of predictions-only purchases.

A plan is flat (one price, as listings were sold before plans) or usage-based (an optional monthly fee paid at
purchase, a price per 1,000 predicted rows and an optional monthly cap of rows); either may start with a trial
(free rows, or free days from the purchase). A plan with a ``private_organisation`` is a private offer: only that
organisation (and operators) sees it or can buy it. Plans never change once made, so a purchase's terms stay
what the buyer saw.

Each metered prediction call is one ``UsageCharge``: its rows, how many were free, the cents charged and the
market's fee; its wallet entries (buyer's debit, the fee, the silos' shares) carry it. Money is integer cents. The models name the ones of market.commerce.models by string: that module imports this
one, so that Django registers them, and not the other way round.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from market.accounts.models import Organisation


class PlanKind(models.TextChoices):
    FLAT = "flat", "Flat price"
    USAGE = "usage", "Usage-based"


class PricingPlan(models.Model):
    listing = models.ForeignKey("commerce.Listing", on_delete=models.PROTECT, related_name="plans")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=PlanKind.choices)
    flat_price_cents = models.BigIntegerField(default=0, help_text="Flat plans: the one price.")
    monthly_fee_cents = models.BigIntegerField(
        default=0, help_text="Usage plans: paid at purchase for the first month."
    )
    price_per_thousand_rows_cents = models.BigIntegerField(
        default=0, help_text="Usage plans: cents per 1,000 predicted rows past the trial."
    )
    monthly_cap_rows = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="Usage plans: the most rows the buyer may predict per calendar month (UTC), trial included.",
    )
    trial_rows = models.PositiveBigIntegerField(
        default=0, help_text="Rows predicted free of charge, once."
    )
    trial_days = models.PositiveIntegerField(
        default=0, help_text="Days from the purchase during which predictions are free."
    )
    private_organisation = models.ForeignKey(
        Organisation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="private_offers",
        help_text="A private offer: only this organisation sees and may buy the plan.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(flat_price_cents__gte=0)
                & Q(monthly_fee_cents__gte=0)
                & Q(price_per_thousand_rows_cents__gte=0),
                name="plan_prices_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(kind="usage")
                | (Q(monthly_fee_cents=0) & Q(monthly_cap_rows__isnull=True)),
                name="plan_usage_terms_only_on_usage",
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.get_kind_display()}) of {self.listing}"


class UsageCharge(models.Model):
    """One metered prediction call of a predictions-only purchase."""

    entitlement = models.ForeignKey(
        "commerce.Entitlement", on_delete=models.PROTECT, related_name="usage_charges"
    )
    purchase = models.ForeignKey(
        "commerce.Purchase", on_delete=models.PROTECT, related_name="usage_charges"
    )
    organisation = models.ForeignKey(Organisation, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    rows = models.PositiveBigIntegerField()
    free_rows = models.PositiveBigIntegerField(help_text="Rows of this call inside the trial.")
    amount_cents = models.BigIntegerField()
    fee_cents = models.BigIntegerField()
    monthly_fee_cents = models.BigIntegerField(
        default=0,
        help_text="Of amount_cents, the plan's monthly fee for the call's month: charged with the first call of "
        "each month after the month of purchase (whose fee the purchase paid).",
    )
    period = models.DateField(help_text="The first day of the calendar month (UTC) of the call.")
    idempotency_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="one_usage_charge_per_idempotency_key",
            ),
            models.CheckConstraint(
                condition=Q(amount_cents__gte=0)
                & Q(fee_cents__gte=0)
                & Q(fee_cents__lte=models.F("amount_cents"))
                & Q(monthly_fee_cents__gte=0)
                & Q(monthly_fee_cents__lte=models.F("amount_cents"))
                & Q(free_rows__lte=models.F("rows")),
                name="usage_charge_amounts_consistent",
            ),
        ]
        indexes = [models.Index(fields=["entitlement", "period"], name="usage_by_period")]

    def __str__(self):
        return f"Usage #{self.id}: {self.rows} rows, {self.amount_cents} cents"
