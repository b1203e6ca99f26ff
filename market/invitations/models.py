from django.conf import settings
from django.db import models

from market.accounts.models import Organisation
from market.federations.models import Federation


class InvitationKind(models.TextChoices):
    ORGANISATION = "organisation", "A new organisation and its first person"
    PERSON = "person", "A person in an existing organisation"


class Invitation(models.Model):
    """A link an operator sends to bring an organisation or a person in (market.invitations.services).

    Only the SHA-256 of the link's token is stored: the link is shown once, when it is made. It works once, until
    it expires or is revoked. Accepting it creates the person (and, for ``organisation``, the organisation), and
    makes the organisation a member of ``federation`` when one is named.
    """

    kind = models.CharField(max_length=20, choices=InvitationKind.choices)
    organisation_name = models.CharField(
        max_length=200, blank=True, help_text="The new organisation's name (kind 'organisation')."
    )
    is_silo = models.BooleanField(default=False)
    is_buyer = models.BooleanField(default=False)
    organisation = models.ForeignKey(
        Organisation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="invitations",
        help_text="The organisation the person joins (kind 'person'), or the one made on acceptance.",
    )
    federation = models.ForeignKey(
        Federation,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="invitations",
        help_text="The federation the (silo) organisation becomes a member of on acceptance.",
    )
    email = models.EmailField(
        blank=True, help_text="Whom the link is for (a note: the market sends no e-mail)."
    )
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"Invitation #{self.id} ({self.kind})"

    @property
    def organisation_label(self) -> str:
        return self.organisation.name if self.organisation_id else self.organisation_name
