"""The units a federation's L1 jobs may protect (issue 40, item 2): party only by default, chosen at creation or
changed by an operator (audited), and anything else refused with a JSON 400 that says what to fix."""

from market.audit.models import AuditEvent
from market.federations.models import Federation
from tests.conftest import api_client_for


def test_a_federation_accepts_party_level_only_until_an_operator_accepts_records_and_it_is_audited(
    federation, operator, silo_user
):
    api = api_client_for(operator)
    assert api.get(f"/api/federations/{federation.slug}/").json()["privacy_units"] == ["party"]
    refused = api_client_for(silo_user).patch(
        f"/api/federations/{federation.slug}/", {"privacy_units": ["record"]}, format="json"
    )
    bad = api.patch(
        f"/api/federations/{federation.slug}/", {"privacy_units": ["silo"]}, format="json"
    )
    empty = api.patch(f"/api/federations/{federation.slug}/", {"privacy_units": []}, format="json")
    assert (refused.status_code, bad.status_code, empty.status_code) == (403, 400, 400)
    assert "privacy_units" in bad.json() and "privacy_units" in empty.json()
    assert Federation.objects.get(id=federation.id).privacy_units == ["party"]
    assert not AuditEvent.objects.filter(action="federation.updated").exists()
    changed = api.patch(
        f"/api/federations/{federation.slug}/",
        {"privacy_units": ["record", "party"]},
        format="json",
    )
    assert changed.status_code == 200 and changed.json()["privacy_units"] == ["party", "record"]
    assert AuditEvent.objects.get(action="federation.updated").details["changed"] == {
        "privacy_units": {"from": ["party"], "to": ["party", "record"]}
    }


def test_a_federation_created_through_the_api_may_name_its_units(operator):
    body = {
        "name": "Records only",
        "class_labels": ["no", "yes"],
        "allowed_privacy_levels": ["L1"],
        "default_privacy_level": "L1",
        "privacy_units": ["record"],
    }
    created = api_client_for(operator).post("/api/federations/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["privacy_units"] == ["record"]
