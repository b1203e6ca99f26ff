"""The market: listings of global models, wallets with an append-only ledger, purchases and entitlements.

Money is integer cents. A wallet's ``balance_cents`` is the sum of its entries, kept in step under a row lock
in the transaction that appends the entry; a CHECK constraint keeps it from going negative and (on
PostgreSQL) a trigger refuses UPDATE and DELETE of entries.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from market.accounts.models import Organisation
from market.federations.models import Federation, PrivacyLevel
from market.jobs.models import GlobalModel


class ListingStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published"
    RETIRED = "retired", "Retired"


class ListingAccess(models.TextChoices):
    DOWNLOAD = "download", "Download"
    PREDICTIONS = "predictions", "Predictions only"


class Listing(models.Model):
    """A global model offered for sale. Once published, what it sells (model, price, licence) never changes;
    a new version is a new listing that names this one as ``previous_version``.

    ``model_family``, ``privacy_level`` and the headline metrics are copied from the global model when the
    listing is created (the global model is immutable), so that the catalog filters without JSON lookups.
    """

    global_model = models.ForeignKey(GlobalModel, on_delete=models.PROTECT, related_name="listings")
    federation = models.ForeignKey(Federation, on_delete=models.PROTECT, related_name="listings")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    licence_text = models.TextField()
    price_cents = models.BigIntegerField()
    status = models.CharField(
        max_length=20, choices=ListingStatus.choices, default=ListingStatus.DRAFT
    )
    previous_version = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="next_versions"
    )
    model_family = models.CharField(max_length=40)
    privacy_level = models.CharField(max_length=2, choices=PrivacyLevel.choices)
    accuracy = models.FloatField(null=True)
    balanced_accuracy = models.FloatField(null=True)
    macro_f1 = models.FloatField(null=True)
    roc_auc = models.FloatField(null=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    access = models.CharField(
        max_length=20,
        choices=ListingAccess.choices,
        default=ListingAccess.DOWNLOAD,
        help_text="Download: the buyer gets the files. Predictions only: an API token for the predict endpoint.",
    )
    max_rows_per_call = models.PositiveIntegerField(
        null=True, blank=True, help_text="Predictions only: the most rows one call may send."
    )
    max_rows_per_day = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Predictions only: the most rows a buyer may predict per UTC day.",
    )
    max_calls_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Predictions only: the most calls a buyer may make per minute.",
    )
    publish_override_reason = models.TextField(
        blank=True,
        help_text=(
            "Set when an operator published a model that fails the publish gate (market.commerce.quality); buyers "
            "see it on the card with the numbers, and the override is in the audit log."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-published_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(price_cents__gte=0), name="listing_price_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(status="draft") | Q(published_at__isnull=False),
                name="listing_published_has_date",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "-published_at", "-id"], name="listing_catalog_order"),
            models.Index(fields=["status", "price_cents"], name="listing_catalog_price"),
        ]

    def __str__(self):
        return f"{self.name} ({self.get_status_display()})"


class Wallet(models.Model):
    """An organisation's credit (created on first use); the one wallet without an organisation is the market's,
    which receives the market fees."""

    organisation = models.OneToOneField(
        Organisation, null=True, blank=True, on_delete=models.PROTECT, related_name="wallet"
    )
    is_market = models.BooleanField(default=False)
    balance_cents = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(balance_cents__gte=0), name="wallet_balance_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(is_market=True, organisation__isnull=True)
                | Q(is_market=False, organisation__isnull=False),
                name="wallet_has_one_owner",
            ),
            models.UniqueConstraint(
                fields=["is_market"], condition=Q(is_market=True), name="one_market_wallet"
            ),
        ]

    def __str__(self):
        return "Market wallet" if self.is_market else f"Wallet of {self.organisation}"


class WalletEntryKind(models.TextChoices):
    TOP_UP = "top_up", "Top-up"
    PURCHASE_DEBIT = "purchase_debit", "Purchase"
    REVENUE_CREDIT = "revenue_credit", "Revenue share"
    MARKET_FEE = "market_fee", "Market fee"
    PAYOUT = "payout", "Payout"
    USAGE_DEBIT = "usage_debit", "Usage"


class Purchase(models.Model):
    """One sale: what the buyer paid for which listing, and how it was split."""

    listing = models.ForeignKey(Listing, on_delete=models.PROTECT, related_name="purchases")
    global_model = models.ForeignKey(
        GlobalModel, on_delete=models.PROTECT, related_name="purchases"
    )
    buyer_organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="purchases"
    )
    buyer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    plan = models.ForeignKey(
        "commerce.PricingPlan",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="purchases",
        help_text="The pricing plan bought; none for a listing's flat price (before plans).",
    )
    price_cents = models.BigIntegerField()
    fee_cents = models.BigIntegerField()
    fee_percent = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["buyer_organisation", "global_model"], name="one_purchase_per_model"
            ),
            models.CheckConstraint(
                condition=Q(fee_cents__gte=0) & Q(fee_cents__lte=models.F("price_cents")),
                name="purchase_fee_within_price",
            ),
        ]

    def __str__(self):
        return f"Purchase #{self.id}: {self.listing} by {self.buyer_organisation}"


class WalletEntry(models.Model):
    """One movement of credit. Append-only; ``amount_cents`` is signed (debits negative). A payout is money the
    market paid a silo outside the app (a bank transfer): recorded here, it takes the amount out of the silo's
    wallet and earnings (market.commerce.payouts)."""

    wallet = models.ForeignKey(Wallet, on_delete=models.PROTECT, related_name="entries")
    kind = models.CharField(max_length=20, choices=WalletEntryKind.choices)
    amount_cents = models.BigIntegerField()
    balance_after_cents = models.BigIntegerField()
    reference = models.CharField(
        max_length=200,
        blank=True,
        help_text="Top-ups and payouts: the payment's reference; posting it again changes nothing.",
    )
    purchase = models.ForeignKey(
        Purchase, null=True, blank=True, on_delete=models.PROTECT, related_name="entries"
    )
    usage_charge = models.ForeignKey(
        "commerce.UsageCharge",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="entries",
        help_text="Set on the entries of a metered prediction call (its debit, fee and revenue shares).",
    )
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "wallet entries"
        constraints = [
            models.UniqueConstraint(
                fields=["reference"], condition=~Q(reference=""), name="one_entry_per_reference"
            ),
            models.CheckConstraint(
                condition=Q(balance_after_cents__gte=0), name="entry_balance_not_negative"
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind="top_up", amount_cents__gt=0, purchase__isnull=True)
                    | Q(kind="purchase_debit", amount_cents__lt=0, purchase__isnull=False)
                    | Q(
                        kind__in=["revenue_credit", "market_fee"],
                        amount_cents__gt=0,
                        purchase__isnull=False,
                    )
                    | Q(kind="payout", amount_cents__lt=0, purchase__isnull=True)
                    | Q(
                        kind="usage_debit",
                        amount_cents__lt=0,
                        purchase__isnull=False,
                        usage_charge__isnull=False,
                    )
                ),
                name="entry_sign_matches_kind",
            ),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} {self.amount_cents:+d} cents"


class Entitlement(models.Model):
    """An organisation's right to download and call one global model."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="entitlements"
    )
    global_model = models.ForeignKey(
        GlobalModel, on_delete=models.PROTECT, related_name="entitlements"
    )
    purchase = models.OneToOneField(Purchase, on_delete=models.PROTECT, related_name="entitlement")
    access = models.CharField(
        max_length=20, choices=ListingAccess.choices, default=ListingAccess.DOWNLOAD
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "global_model"], name="one_entitlement_per_model"
            )
        ]


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` for a purchase: the same key from the same organisation returns the first
    purchase and never charges again."""

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    listing = models.ForeignKey(Listing, on_delete=models.CASCADE, related_name="+")
    purchase = models.ForeignKey(Purchase, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "key"], name="one_purchase_per_idempotency_key"
            )
        ]


class CreditRequestStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DECLINED = "declined", "Declined"


class CreditRequest(models.Model):
    """A buyer's request for credits, as a market without card payments runs it: the buyer states the amount
    (and, in ``note``, how it pays: an invoice or purchase-order number); an operator approves it once the
    payment arrived, which tops the wallet up with the request as the payment's reference, or declines it."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="credit_requests"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    amount_cents = models.BigIntegerField()
    note = models.CharField(max_length=500, blank=True)
    payment_reference = models.CharField(
        max_length=200,
        blank=True,
        help_text="Approved requests: the reference of the payment the operator received (bank transfer, invoice).",
    )
    status = models.CharField(
        max_length=20, choices=CreditRequestStatus.choices, default=CreditRequestStatus.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    top_up = models.OneToOneField(
        WalletEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(amount_cents__gt=0), name="credit_request_amount_positive"
            ),
            models.CheckConstraint(
                condition=Q(status="approved", top_up__isnull=False)
                | (~Q(status="approved") & Q(top_up__isnull=True)),
                name="credit_request_approved_has_top_up",
            ),
        ]

    def __str__(self):
        return f"Credit request #{self.id}: {self.amount_cents} cents for {self.organisation}"


# Pricing plans and metered use live in their own module; imported here so that Django registers them.
from market.commerce.plan_models import PlanKind, PricingPlan, UsageCharge  # noqa: E402, F401
