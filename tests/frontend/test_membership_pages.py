"""Membership in the browser without the admin: a silo asks to join, the operator admits, refuses and removes on the
Members tab, edits the federation, and invites an organisation whose person accepts the link and is signed in."""

import re
from html import unescape

import pytest

from market.audit.models import AuditEvent
from market.federations.models import Federation, JoinRequest, Membership
from market.invitations.models import Invitation


def client_for(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def by_request(federation_with_data):
    Federation.objects.filter(id=federation_with_data.id).update(membership_policy="request")
    return federation_with_data


def test_a_silo_asks_to_join_and_the_operator_admits_it_on_the_members_tab(
    client, django_user_model, by_request, other_silo_user, operator
):
    from django.test import Client

    silo = client_for(Client(), other_silo_user)
    page = silo.get("/federations/adult-income/").content.decode()
    assert "Ask to join Adult income" in page

    asked = silo.post("/federations/adult-income/join/", follow=True).content.decode()
    assert "asked to join Adult income" in asked
    assert "Your request to join waits for the market" in asked
    assert "Request waiting" in silo.get("/federations/").content.decode()

    operator_browser = client_for(Client(), operator)
    members_tab = operator_browser.get("/federations/adult-income/?tab=members").content.decode()
    join_request = JoinRequest.objects.get()
    assert f'action="/join-requests/{join_request.id}/admit/"' in members_tab
    assert "Admit Contoso Bank" in members_tab

    admitted = operator_browser.post(f"/join-requests/{join_request.id}/admit/", follow=True)
    assert "Contoso Bank is now a member of Adult income." in admitted.content.decode()
    assert Membership.objects.filter(organisation=other_silo_user.organisation).exists()
    assert "Upload models" in silo.get("/federations/adult-income/").content.decode()


def test_a_prospective_member_reads_the_terms_before_it_asks_to_join(
    client, by_request, other_silo_user
):
    """ε limit and δ, the revenue split and the columns its rows need; not the encoding's statistics nor the
    members' downloads."""
    page = unescape(
        client_for(client, other_silo_user).get(f"/federations/{by_request.slug}/").content.decode()
    )
    terms = re.search(r'id="membership-terms"[^>]*>(.*?)</dl>', page, re.S).group(1)
    assert re.search(
        r'id="terms-budget">ε limit 10 \(weak protection at most: docs/budgets.md, "ε in words"\), '
        r"δ 0.00001</dd>",
        terms,
    )
    assert "<dd>By share of agreeing labels</dd>" in terms
    spec = by_request.public_datasets.first().feature_spec
    required = re.search(r'id="required-columns">(.*?)</dd>', terms).group(1)
    assert re.findall(r"<code>([^<]+)</code> \((\w+)\)", required) == [
        (column["name"], column["type"]) for column in spec["columns"]
    ]
    assert "mean" not in page and "features.npz" not in page
    assert "Ask to join" in page


def test_a_refusal_reason_reaches_the_silo_and_it_may_ask_again(
    by_request, other_silo_user, operator
):
    from django.test import Client

    silo = client_for(Client(), other_silo_user)
    silo.post("/federations/adult-income/join/")
    join_request = JoinRequest.objects.get()

    client_for(Client(), operator).post(
        f"/join-requests/{join_request.id}/refuse/", {"reason": "Sign the data agreement first"}
    )

    page = silo.get("/federations/adult-income/").content.decode()
    assert "Your last request was refused: Sign the data agreement first." in page
    assert "Ask to join Adult income" in page


def test_a_federation_by_invitation_shows_a_sentence_instead_of_a_join_button(
    by_request, other_silo_user, client
):
    Federation.objects.update(membership_policy="invitation")

    page = client_for(client, other_silo_user).get("/federations/adult-income/").content.decode()
    refused = client.post("/federations/adult-income/join/")

    assert "admits members by invitation only" in page
    assert 'action="/federations/adult-income/join/"' not in page
    assert refused.status_code == 403


def test_the_operator_removes_a_member_and_edits_the_federation(
    federation_with_data, silo_user, operator, client
):
    browser = client_for(client, operator)
    members_tab = browser.get("/federations/adult-income/?tab=members").content.decode()
    assert "Remove Northwind Hospital" in members_tab

    removed = browser.post(
        f"/federations/adult-income/members/{silo_user.organisation_id}/remove/", follow=True
    ).content.decode()
    edit_page = browser.get("/federations/adult-income/edit/").content.decode()
    saved = browser.post(
        "/federations/adult-income/edit/",
        {"name": "Adult income (2026)", "description": "Census.", "membership_policy": "request"},
    )
    refused = browser.post(
        "/federations/adult-income/edit/",
        {"name": "", "description": "", "membership_policy": "request"},
    )

    assert "Northwind Hospital is no longer a member of Adult income." in removed
    assert not Membership.objects.exists()
    assert 'name="membership_policy" value="open" checked' in edit_page
    assert saved.status_code == 302 and saved["Location"] == "/federations/adult-income/"
    federation = Federation.objects.get()
    assert (federation.name, federation.membership_policy) == ("Adult income (2026)", "request")
    assert refused.status_code == 400 and "1 to 200 characters" in refused.content.decode()


def test_the_operator_changes_the_revenue_split_on_the_edit_page(
    federation_with_data, operator, client
):
    browser = client_for(client, operator)
    edit_page = browser.get("/federations/adult-income/edit/").content.decode()
    federation = Federation.objects.get()
    form = {
        "name": federation.name,
        "description": federation.description,
        "membership_policy": federation.membership_policy,
    }
    saved = browser.post("/federations/adult-income/edit/", {**form, "revenue_split": "value"})
    refused = browser.post("/federations/adult-income/edit/", {**form, "revenue_split": "most"})

    assert '<option value="agreement" selected>' in edit_page
    assert saved.status_code == 302
    assert Federation.objects.get().revenue_split == "value"
    assert refused.status_code == 400
    assert "'revenue_split' must be one of agreement, value, equal" in unescape(
        refused.content.decode()
    )
    assert AuditEvent.objects.get(action="federation.updated").details["changed"] == {
        "revenue_split": {"from": "agreement", "to": "value"}
    }


def test_an_invited_organisation_accepts_its_link_once_and_is_signed_in_as_a_member(
    federation, operator
):
    from django.test import Client

    operator_browser = client_for(Client(), operator)
    made = operator_browser.post(
        "/people/",
        {
            "kind": "organisation",
            "organisation_name": "Harbour Clinic",
            "is_silo": "on",
            "federation": "adult-income",
            "expires_in_days": "7",
        },
    ).content.decode()
    link = re.search(r'id="invitation-link" readonly value="([^"]+)"', made).group(1)
    path = link.removeprefix("http://testserver")
    listed = operator_browser.get("/people/").content.decode()

    invited = Client()
    offer = invited.get(path).content.decode()
    weak = invited.post(path, {"username": "ada", "password": "short"})
    accepted = invited.post(path, {"username": "ada", "password": "harbour-clinic-2026"})
    home = invited.get("/", follow=True).content.decode()
    reused = Client().get(path)

    assert "Harbour Clinic" in offer and "Adult income" in offer
    assert link not in listed and "Withdraw #" in listed  # the link is shown once
    assert weak.status_code == 400 and "too short" in weak.content.decode()
    assert accepted.status_code == 302 and accepted["Location"] == "/"
    assert "ada" in home
    assert Membership.objects.filter(organisation__name="Harbour Clinic").exists()
    assert reused.status_code == 410 and "already used" in reused.content.decode()
    assert Client().get("/invitations/made-up-token/").status_code == 404
    assert Invitation.objects.get().accepted_by.username == "ada"


def test_the_operator_withdraws_an_invitation_and_its_link_stops_working(operator, client):
    browser = client_for(client, operator)
    made = browser.post(
        "/people/", {"kind": "organisation", "organisation_name": "Late Lab", "is_buyer": "on"}
    ).content.decode()
    path = re.search(r'value="http://testserver(/invitations/[^"]+)"', made).group(1)
    invitation = Invitation.objects.get()

    browser.post(f"/people/invitations/{invitation.id}/withdraw/")

    assert "withdrawn" in client.get(path).content.decode()
    assert client.get(path).status_code == 410


def test_admitting_twice_with_the_same_form_key_admits_once(by_request, other_silo_user, operator):
    from django.test import Client

    from tests.frontend.journey_helpers import form_key

    client_for(Client(), other_silo_user).post("/federations/adult-income/join/")
    join_request = JoinRequest.objects.get()
    browser = client_for(Client(), operator)
    members_tab = browser.get("/federations/adult-income/?tab=members").content.decode()
    form = {"idempotency_key": form_key(members_tab, f"/join-requests/{join_request.id}/admit/")}

    first = browser.post(f"/join-requests/{join_request.id}/admit/", form)
    resent = browser.post(f"/join-requests/{join_request.id}/admit/", form)

    assert first.status_code == resent.status_code == 302
    assert first["Location"] == resent["Location"] == "/federations/adult-income/?tab=members"
    assert Membership.objects.filter(organisation=other_silo_user.organisation).count() == 1
    assert AuditEvent.objects.filter(action="membership.admitted").count() == 1
