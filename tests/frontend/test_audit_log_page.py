"""The audit log page: 50 entries a page, objects linked to their pages, details as labelled values."""

import re

import pytest
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
    assert f'<a href="/federations/{federation.slug}/">{federation.name}</a>' in first
    assert "<dt>allowed privacy levels</dt><dd>[&quot;L1&quot;, &quot;L2&quot;]</dd>" in first
    assert "<dt>buyers may launch jobs</dt><dd>no</dd>" in first
    assert "{&#x27;" not in first  # no Python dict repr


def test_who_names_the_actor_with_their_own_organisation_objects_by_name_and_amounts_in_credits(
    operator, silo_user, federation, client
):
    from decimal import Decimal

    from market.budgets.models import PrivacyBudget
    from market.commerce.wallets import wallet_top_up

    budget = PrivacyBudget.objects.create(
        federation=federation,
        organisation=silo_user.organisation,
        epsilon_limit=Decimal(5),
        delta=Decimal("0.00001"),
    )
    audit_record(
        action="budget.limit_changed",
        actor=operator,
        organisation=silo_user.organisation,
        target=budget,
        details={"epsilon_limit": "5"},
    )
    entry, _ = wallet_top_up(
        organisation=silo_user.organisation, amount_cents=123456, reference="BANK-1", actor=operator
    )
    audit_record(action="token.created", actor=silo_user)
    client.force_login(operator)
    page = client.get("/security/audit/").content.decode()

    # The operator is not "of" the silo: the silo is what the event concerns.
    assert (
        'olivia-operator <span class="meta">(market operator)</span><br><span class="meta">for Northwind Hospital</span>'
        in page
    )
    assert 'sam-silo <span class="meta">(Northwind Hospital)</span>' in page
    assert (
        f'<a href="/federations/{federation.slug}/budgets/">Privacy budget of Northwind Hospital in '
        f"{federation.name}</a>"
    ) in page
    assert "PrivacyBudget #" not in page
    assert (
        f'<a href="/market/money/organisations/{silo_user.organisation_id}/">Top-up of 1,234.56 credits, '
        "wallet of Northwind Hospital</a>"
    ) in page
    assert "<dt>amount</dt><dd>1,234.56 credits</dd>" in page and "123456" not in page


def test_membership_invitation_data_and_token_events_name_their_objects_and_link_them(
    operator, silo_user, federation, adult_public_csv, client
):
    from market.accounts.services import user_token
    from market.federations.membership import federation_join, join_request_admit
    from market.federations.models import JoinRequest
    from market.federations.services import public_dataset_upload
    from market.invitations.services import invitation_create

    federation.membership_policy = "request"
    federation.save(update_fields=["membership_policy"])
    invitation_create(
        user=operator, kind="organisation", organisation_name="Harbour Clinic", is_silo=True
    )
    federation_join(federation=federation, user=silo_user)
    join_request_admit(join_request_id=JoinRequest.objects.get().id, user=operator)
    public_dataset_upload(federation=federation, data=adult_public_csv, uploaded_by=operator)
    user_token(user=silo_user)
    client.force_login(operator)
    page = client.get("/security/audit/").content.decode()

    members = f"/federations/{federation.slug}/?tab=members"
    assert '<a href="/people/">Invitation of Harbour Clinic</a>' in page
    assert f'<a href="{members}">Join request of Northwind Hospital to Adult income</a>' in page
    assert f'<a href="{members}">Membership of Northwind Hospital in Adult income</a>' in page
    assert (
        f'<a href="/federations/{federation.slug}/data/">Public data of Adult income (2000 rows)</a>'
        in page
    )
    assert "API token “default” of sam-silo" in page
    assert not any(
        f"{kind} #" in page
        for kind in ("Invitation", "JoinRequest", "Membership", "PublicDataset", "ApiToken")
    )
    # times as the log shows them, and no empty detail
    assert re.search(r"<dt>expires at</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC</dd>", page)
    assert "<dd></dd>" not in page


def test_actions_read_as_words_and_details_are_rounded_as_the_pages_round(operator, client):
    """Issue 43 item 6: raw action codes and "0.5291175259945953" were the log's words."""
    audit_record(
        action="job.launched_despite_estimate",
        actor=operator,
        details={"balanced_accuracy": 0.5291175259945953, "scores": {"accuracy": 0.78812345}},
    )
    audit_record(action="webhook.secret_rotated", actor=operator)
    client.force_login(operator)
    page = client.get("/security/audit/").content.decode()

    assert (
        '<a href="?action=job.launched_despite_estimate">Job launched despite its estimate</a><br>'
        '<code class="meta">job.launched_despite_estimate</code>'
    ) in page
    assert '<a href="?action=webhook.secret_rotated">Webhook secret rotated</a>' in page
    assert "<dt>balanced accuracy</dt><dd>0.529</dd>" in page
    assert "<dt>scores</dt><dd>{&quot;accuracy&quot;: 0.788}</dd>" in page
    assert "0.5291175" not in page and "0.788123" not in page


@pytest.mark.browser
def test_the_audit_details_wrap_in_words_not_one_letter_a_line_at_1280_px(
    live_server, transactional_db, page, operator
):
    from tests.frontend.journey_helpers import sign_in

    for number in range(12):
        audit_record(
            action="listing.publish_gate_overridden",
            actor=operator,
            details={
                "reason": "A buyer asked for this model's recall on the rare class, whatever its accuracy.",
                "balanced_accuracy": 0.5291175259945953,
                "listing": number,
                "sha256": "9f2c" * 16,
                # a long key once took the whole row and left the values no width: one letter a line
                "override_reason_as_the_operator_wrote_it_on_the_publish_form": "The buyer agreed to it.",
                "parameters": {f"setting_{index}": index / 7 for index in range(12)},
            },
        )
    sign_in(page, live_server.url, operator.username, "operator-password")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/security/audit/")
    cells = page.locator("table.audit-events .audit-details-cell")
    assert cells.count() >= 12  # and the sign-in
    values = page.locator(".audit-details dd").all()
    widths = [value.bounding_box()["width"] for value in values]
    assert min(widths) >= 150, widths  # every value reads in words (it was 0 px wide)
    reason = page.locator(".audit-details dd", has_text="A buyer asked").first
    line = reason.evaluate("element => parseFloat(getComputedStyle(element).lineHeight)")
    assert reason.bounding_box()["height"] <= 5 * line  # an 80-character sentence: a few lines
    # twelve such entries fit in a few screens (the long key made the page about 40,000 px tall)
    assert page.locator("table.audit-events").bounding_box()["height"] < 12 * 800
