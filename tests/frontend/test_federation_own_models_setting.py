"""The operator's new-federation page offers the own-model setting, ticked by default (issue 31)."""

from market.federations.models import Federation

FORM = {
    "name": "Clinic outcomes",
    "class_labels": "no\nyes",
    "label_column": "outcome",
    "allowed_privacy_levels": ["L0", "L1"],
    "default_privacy_level": "L1",
}


def test_the_form_ticks_own_models_by_default_and_an_unticked_box_refuses_them(client, operator):
    client.force_login(operator)
    page = client.get("/federations/new/").content.decode()
    assert '<input type="checkbox" name="accepts_own_models" checked>' in page
    response = client.post("/federations/new/", FORM)
    assert response.status_code == 302
    assert Federation.objects.get(slug="clinic-outcomes").accepts_own_models is False
    response = client.post(
        "/federations/new/", {**FORM, "name": "Bank churn", "accepts_own_models": "on"}
    )
    assert response.status_code == 302
    assert Federation.objects.get(slug="bank-churn").accepts_own_models is True
