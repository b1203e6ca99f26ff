"""The audit log page: 50 entries a page, objects linked to their pages, details as labelled values."""

from django.test import Client

from market.audit.services import audit_record


def test_the_audit_log_is_paginated_linked_and_readable(operator, federation):
    for number in range(60):
        audit_record(action="token.created", actor=operator, details={"name": f"laptop {number}"})
    audit_record(
        action="federation.updated",
        actor=operator,
        target=federation,
        details={"allowed_privacy_levels": ["L1", "L2"], "buyers_may_launch_jobs": False},
    )
    client = Client()
    client.force_login(operator)

    first = client.get("/security/audit/").content.decode()
    second = client.get("/security/audit/?page=2").content.decode()

    assert "Entries 1–50 of" in first and "Entries 51–" in second
    assert f'<a href="/federations/{federation.slug}/">Federation #{federation.id}</a>' in first
    assert "<dt>allowed privacy levels</dt><dd>[&quot;L1&quot;, &quot;L2&quot;]</dd>" in first
    assert "<dt>buyers may launch jobs</dt><dd>no</dd>" in first
    assert "{&#x27;" not in first  # no Python dict repr
