from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from market.accounts.services import SignInLocked, signin_check_allowed


class SignInLimits:
    """Refuse a sign-in form while the account or the address is over its failed-attempt limit."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        try:
            signin_check_allowed(username=username, request=self.request)
        except SignInLocked as locked:
            raise ValidationError(str(locked), code="locked") from locked
        return super().clean()


class SignInForm(SignInLimits, AuthenticationForm):
    """The market's sign-in page."""


class AdminSignInForm(SignInLimits, AdminAuthenticationForm):
    """The admin site's sign-in page, under the same limits."""
