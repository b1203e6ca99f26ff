"""Invitations: a link that works once and expires, only its hash stored; accepting it creates the person (and
the organisation), makes a silo a member of the named federation, and signs in."""

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from market.accounts.models import Organisation, User
from market.audit.models import AuditEvent
from market.errors import Conflict, Gone, InvalidInput, NotFound, PermissionDenied
from market.federations.models import Membership
from market.invitations.models import Invitation
from market.invitations.services import invitation_accept, invitation_create, invitation_revoke
from tests.conftest import api_client_for


def invite_silo(operator, federation=None, **fields):
    return invitation_create(
        user=operator,
        kind="organisation",
        organisation_name=fields.pop("organisation_name", "Harbour Clinic"),
        is_silo=True,
        federation=federation,
        **fields,
    )


def test_only_the_tokens_hash_is_stored_and_the_invitation_is_audited(operator, federation):
    invitation, token = invite_silo(operator, federation, email="ada@harbour.example")

    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(Invitation.objects.values()))
    created = AuditEvent.objects.get(action="invitation.created")
    assert created.details["organisation"] == "Harbour Clinic"
    assert token not in str(created.details)
    assert invitation.expires_at - timezone.now() > timedelta(days=6, hours=23)


def test_accepting_creates_the_organisation_and_person_and_the_federation_membership(
    operator, federation, rf
):
    _, token = invite_silo(operator, federation)

    person = invitation_accept(
        token=token, username="ada", password="harbour-clinic-2026", request=rf.post("/")
    )

    assert person.check_password("harbour-clinic-2026")
    assert (person.organisation.name, person.organisation.is_silo) == ("Harbour Clinic", True)
    assert Membership.objects.filter(
        federation=federation, organisation=person.organisation
    ).exists()
    invitation = Invitation.objects.get()
    assert (invitation.accepted_by, invitation.organisation) == (person, person.organisation)
    joined = AuditEvent.objects.get(action="membership.joined")
    assert joined.details["via"] == "invitation"


def test_a_used_link_an_expired_link_a_withdrawn_link_and_an_unknown_link_each_say_why(
    operator, federation, rf
):
    _, used = invite_silo(operator, organisation_name="Used Lab")
    invitation_accept(token=used, username="used", password="a fine password", request=rf.post("/"))
    expired_invitation, expired = invite_silo(operator, organisation_name="Late Lab")
    Invitation.objects.filter(id=expired_invitation.id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    withdrawn_invitation, withdrawn = invite_silo(operator, organisation_name="Gone Lab")
    invitation_revoke(invitation_id=withdrawn_invitation.id, user=operator)
    people = User.objects.count()

    for token, error, sentence in (
        (used, Gone, "already used"),
        (expired, Gone, "expired on"),
        (withdrawn, Gone, "withdrawn"),
        ("made-up", NotFound, "not one the market made"),
    ):
        with pytest.raises(error, match=sentence):
            invitation_accept(
                token=token, username="again", password="a fine password", request=rf.post("/")
            )

    assert User.objects.count() == people
    assert not Organisation.objects.filter(name__in=["Late Lab", "Gone Lab"]).exists()


def test_a_weak_password_or_a_taken_username_is_refused_and_the_link_still_works(
    operator, silo_user, rf
):
    _, token = invitation_create(
        user=operator, kind="person", organisation_id=silo_user.organisation_id
    )

    with pytest.raises(InvalidInput, match="too short"):
        invitation_accept(token=token, username="nina", password="short", request=rf.post("/"))
    with pytest.raises(Conflict, match="taken"):
        invitation_accept(
            token=token, username="SAM-SILO", password="a fine password", request=rf.post("/")
        )
    with pytest.raises(InvalidInput, match="username"):
        invitation_accept(
            token=token, username="nina smith!", password="a fine password", request=rf.post("/")
        )
    person = invitation_accept(
        token=token, username="nina", password="a fine password", request=rf.post("/")
    )

    assert person.organisation == silo_user.organisation
    assert User.objects.filter(organisation=silo_user.organisation).count() == 2


def test_invitations_are_the_operators_and_their_input_is_checked(operator, silo_user, federation):
    with pytest.raises(PermissionDenied):
        invite_silo(silo_user)
    with pytest.raises(Conflict, match="already exists"):
        invite_silo(operator, organisation_name="northwind hospital")
    with pytest.raises(InvalidInput, match="silo, a buyer or both"):
        invitation_create(user=operator, kind="organisation", organisation_name="Nobody")
    with pytest.raises(InvalidInput, match="only silos can be invited into a federation"):
        invitation_create(
            user=operator,
            kind="organisation",
            organisation_name="Fabrikam",
            is_buyer=True,
            federation=federation,
        )
    with pytest.raises(InvalidInput, match="1 to 30 days"):
        invite_silo(operator, expires_in_days=31)
    with pytest.raises(InvalidInput, match="not an e-mail address"):
        invite_silo(operator, email="ada at harbour")

    assert not Invitation.objects.exists()


def test_the_api_makes_a_link_once_and_accepting_it_answers_a_working_token(operator, federation):
    from rest_framework.test import APIClient

    made = api_client_for(operator).post(
        "/api/invitations/",
        {
            "kind": "organisation",
            "organisation_name": "Harbour Clinic",
            "is_silo": True,
            "federation": federation.slug,
        },
        format="json",
    )
    link = made.json()["link"]
    token = link.rstrip("/").rsplit("/", 1)[1]
    anonymous = APIClient()

    offer = anonymous.get(f"/api/invitations/accept/{token}/")
    accepted = anonymous.post(
        f"/api/invitations/accept/{token}/",
        {"username": "ada", "password": "harbour-clinic-2026"},
        format="json",
    )
    again = anonymous.post(
        f"/api/invitations/accept/{token}/",
        {"username": "ada2", "password": "harbour-clinic-2026"},
        format="json",
    )
    listed = api_client_for(operator).get("/api/invitations/").json()

    assert made.status_code == 201 and link.startswith("http://testserver/invitations/")
    assert offer.json()["organisation"] == "Harbour Clinic"
    assert offer.json()["federation"] == "Adult income"
    assert accepted.status_code == 201
    assert accepted.json()["organisation"] == "Harbour Clinic"
    me = APIClient()
    me.credentials(HTTP_AUTHORIZATION=f"Token {accepted.json()['token']}")
    assert me.get("/api/me/").json()["username"] == "ada"
    assert again.status_code == 410 and "already used" in again.json()["detail"]
    assert anonymous.get("/api/invitations/accept/made-up/").status_code == 404
    assert [row["state"] for row in listed] == ["accepted"] and "link" not in listed[0]


def test_opening_links_is_rate_limited_per_address(operator, settings):
    from rest_framework.test import APIClient

    settings.ONEFOLD_INVITATION_LOOKUPS_PER_HOUR = 3
    client = APIClient()

    answers = [client.get(f"/api/invitations/accept/guess-{n}/").status_code for n in range(4)]

    assert answers == [404, 404, 404, 429]
