"""Per-(federation, silo) privacy budgets and their append-only ledger.

``spent`` and ``reserved`` are derived from the ledger by the accountant
(:func:`workers.privacy.costs.compose_costs`) and stored under the budget row's lock, so a CHECK
constraint can make overspending impossible: ``spent + reserved ≤ epsilon_limit``. ``reserved`` is
what outstanding reservations add to ``spent`` *after* composition (often less than their sum).
"""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from market.accounts.models import Organisation
from market.federations.models import Federation

EPSILON_DIGITS = {"max_digits": 12, "decimal_places": 6}
DELTA_DIGITS = {"max_digits": 20, "decimal_places": 18}
#: ε stored with 6 decimals; amounts are rounded up (towards spending more), never down.
EPSILON_QUANTUM = Decimal("0.000001")


class PrivacyUnit(models.TextChoices):
    PARTY_LEVEL = "party-level", "Party-level (one silo's whole data)"
    EXAMPLE_LEVEL = "example-level", "Example-level (one record)"


class EntryKind(models.TextChoices):
    RESERVE = "reserve", "Reserve"
    CHARGE = "charge", "Charge"
    RELEASE = "release", "Release"
    ADJUST = "adjust", "Limit change"


class PrivacyBudget(models.Model):
    """How much privacy one silo may spend in one federation, and how much is spent and reserved."""

    federation = models.ForeignKey(
        Federation, on_delete=models.PROTECT, related_name="privacy_budgets"
    )
    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="privacy_budgets"
    )
    epsilon_limit = models.DecimalField(**EPSILON_DIGITS)
    delta = models.DecimalField(
        **DELTA_DIGITS, help_text="δ at which composed Rényi curves are converted."
    )
    spent = models.DecimalField(**EPSILON_DIGITS, default=Decimal(0))
    reserved = models.DecimalField(**EPSILON_DIGITS, default=Decimal(0))
    composition_rule = models.CharField(
        max_length=20,
        default="none",
        help_text="How the spend was composed: rdp, additive, rdp+additive, none.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["federation_id", "organisation__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["federation", "organisation"], name="one_budget_per_silo_and_federation"
            ),
            models.CheckConstraint(
                condition=Q(spent__gte=0) & Q(reserved__gte=0), name="budget_amounts_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(spent__lte=F("epsilon_limit") - F("reserved")),
                name="budget_never_overspent",
            ),
            models.CheckConstraint(
                condition=Q(delta__gt=0) & Q(delta__lt=1), name="budget_delta_in_open_unit_interval"
            ),
        ]

    def __str__(self):
        return f"{self.organisation} in {self.federation}: ε {self.spent}+{self.reserved} of {self.epsilon_limit}"

    @property
    def remaining(self) -> Decimal:
        return self.epsilon_limit - self.spent - self.reserved

    @property
    def used_fraction(self) -> float:
        return (
            float((self.spent + self.reserved) / self.epsilon_limit) if self.epsilon_limit else 1.0
        )


class BudgetEntry(models.Model):
    """One append-only ledger line. The database refuses UPDATE and DELETE on this table (PostgreSQL trigger).

    ``epsilon`` is the amount of the line on its own: a reservation's or charge's data-independent ε, a
    release's freed reservation, or an adjustment's change of the limit (signed). ``spent_after``,
    ``reserved_after`` and ``epsilon_limit_after`` snapshot the budget once the line is applied.
    """

    budget = models.ForeignKey(PrivacyBudget, on_delete=models.PROTECT, related_name="entries")
    kind = models.CharField(max_length=20, choices=EntryKind.choices)
    epsilon = models.DecimalField(**EPSILON_DIGITS)
    unit = models.CharField(max_length=20, choices=PrivacyUnit.choices, blank=True)
    delta = models.DecimalField(**DELTA_DIGITS, null=True, blank=True)
    mechanism = models.CharField(max_length=20, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    cost = models.JSONField(
        null=True,
        blank=True,
        help_text="The PrivacyCost: its report and Rényi curve with orders (null for adjustments).",
    )
    # What reserved, charged or released the line (market.budgets.spending.Spender): its kind and id, one generic
    # reference for every way to spend privacy (a job, an L2 submission, an FAug generator, ...); empty for a limit
    # change. The app that owns a kind registers how it is named and linked (market.budgets.spending.SpenderKind).
    spender_kind = models.CharField(max_length=40, blank=True)
    spender_id = models.PositiveBigIntegerField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    composition_rule = models.CharField(max_length=20)
    spent_after = models.DecimalField(**EPSILON_DIGITS)
    reserved_after = models.DecimalField(**EPSILON_DIGITS)
    epsilon_limit_after = models.DecimalField(**EPSILON_DIGITS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["budget", "kind"]),
            models.Index(fields=["spender_kind", "spender_id"], name="budgetentry_spender"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind="adjust") | Q(epsilon__gte=0), name="entry_amount_not_negative"
            ),
        ]

    def __str__(self):
        return f"{self.kind} ε {self.epsilon} on budget #{self.budget_id}"

    def spender_id_of(self, spender_kind: str) -> int | None:
        """The spender's id if it is of ``spender_kind`` (for answers that keep one field per kind), else None."""
        return self.spender_id if self.spender_kind == spender_kind else None
