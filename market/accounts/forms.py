from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from market.accounts.services import SignInLocked, signin_check_allowed


class SignInForm(AuthenticationForm):
    """Django's sign-in form, refused while the account or the address is over its failed-attempt limit."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        try:
            signin_check_allowed(username=username, request=self.request)
        except SignInLocked as locked:
            raise ValidationError(str(locked), code="locked") from locked
        return super().clean()
