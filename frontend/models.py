from django.conf import settings
from django.db import models


class FormSubmission(models.Model):
    """One page form sent with the one-time key its page rendered (:mod:`frontend.sent_once`): a second send of
    the same key to the same address — Back and submit again, a double click — is answered with the first send's
    result instead of acting twice. The forms of one page share its key; each address acts once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64)
    path = models.CharField(max_length=500, help_text="The form's action: where the key was sent.")
    status_code = models.PositiveSmallIntegerField(
        null=True, help_text="The first send's answer; empty while it is being processed."
    )
    result_url = models.CharField(
        max_length=2000, blank=True, help_text="Where the first send's answer redirected."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "key", "path"], name="one_effect_per_form_key_and_address"
            )
        ]
