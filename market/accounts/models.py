from django.contrib.auth.models import AbstractUser
from django.db import models


class Organisation(models.Model):
    """A company or institution; a silo sells knowledge, a buyer buys models, some do both."""

    name = models.CharField(max_length=200, unique=True)
    is_silo = models.BooleanField(default=True)
    is_buyer = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class User(AbstractUser):
    """A person; belongs to one organisation. Staff users are the market's operators."""

    organisation = models.ForeignKey(
        Organisation, null=True, blank=True, on_delete=models.PROTECT, related_name="members"
    )

    @property
    def is_operator(self) -> bool:
        return self.is_staff


class ApiToken(models.Model):
    """A named API token. Only the SHA-256 of the key is stored: the key is shown once, when it is created.

    A token works until it expires or its owner revokes it; either stops it at once (every request
    looks the token up).
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(
        max_length=8, help_text="The key's first characters, so owners can tell tokens apart."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    predict_global_model_id = models.BigIntegerField(
        null=True,
        blank=True,
        help_text=(
            "Set on the token a predictions-only purchase gives: it calls only this global model's predict "
            "endpoint and nothing else (market.accounts.authentication)."
        ),
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.key_prefix}…)"
