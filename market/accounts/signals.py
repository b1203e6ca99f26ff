"""Sign-ins through Django's authentication (the web form, the admin, the token endpoint's password check)."""

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from market.accounts.services import signin_failure_record, signin_success_record


@receiver(user_logged_in, dispatch_uid="onefold-sign-in-audited")
def sign_in_audited(sender, request, user, **kwargs):
    signin_success_record(user=user, request=request, via="web")


@receiver(user_login_failed, dispatch_uid="onefold-failed-sign-in-counted")
def failed_sign_in_counted(sender, credentials, request=None, **kwargs):
    signin_failure_record(username=str(credentials.get("username", "")), request=request)
