from django.test import Client

from market.accounts.models import User
from market.audit.models import AuditEvent


def test_making_someone_an_operator_in_the_admin_is_audited(operator, silo_user):
    browser = Client()
    browser.force_login(operator)
    form = browser.get(f"/admin/accounts/user/{silo_user.id}/change/").context["adminform"].form
    data = {
        name: value
        for name, value in form.initial.items()
        if value is not None
        and name not in {"password", "groups", "user_permissions", "last_login", "date_joined"}
    }
    data.update(
        {
            "is_staff": "on",
            "organisation": silo_user.organisation_id,
            "date_joined_0": "2026-11-23",
            "date_joined_1": "05:00:00",
            "is_active": "on",
        }
    )
    response = browser.post(f"/admin/accounts/user/{silo_user.id}/change/", data)
    assert response.status_code == 302, (
        response.context["adminform"].form.errors if response.context else response
    )
    assert User.objects.get(id=silo_user.id).is_staff
    event = AuditEvent.objects.get(action="account.role_changed")
    assert (event.actor, event.object_id, event.details) == (
        operator,
        str(silo_user.id),
        {"username": "sam-silo", "changes": {"is_staff": [False, True]}},
    )
