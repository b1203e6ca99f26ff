from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from market.accounts.services import (
    SignInLocked,
    signin_check_allowed,
    signin_check_allowed_after_failure,
)


class SignInLimits:
    """Refuse a sign-in form while the account is over its failed-attempt limits, and a wrong password while the
    address is over its own (market.accounts.services says why a right one still passes)."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        if not (username and self.cleaned_data.get("password")):
            return super().clean()  # no password is checked: nothing to count
        try:
            signin_check_allowed(username=username, request=self.request)
            try:
                return super().clean()
            except ValidationError:
                signin_check_allowed_after_failure(username=username, request=self.request)
                raise
        except SignInLocked as locked:
            raise ValidationError(str(locked), code="locked") from locked


class SignInForm(SignInLimits, AuthenticationForm):
    """The market's sign-in page."""


class AdminSignInForm(SignInLimits, AdminAuthenticationForm):
    """The admin site's sign-in page, under the same limits."""
