from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from market.accounts.models import ApiToken
from market.accounts.selectors import api_token_hash
from market.accounts.services import api_token_create
from market.audit.models import AuditEvent


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_sign_in_endpoint_creates_a_named_token_stored_only_as_a_hash(silo_user, client):
    response = client.post(
        "/api/auth/token/",
        {"username": "sam-silo", "password": "silo-password", "name": "training server"},
    )
    assert response.status_code == 200
    body = response.json()
    token = ApiToken.objects.get(id=body["id"])
    assert (token.name, token.user, token.key_hash, token.key_prefix) == (
        "training server",
        silo_user,
        api_token_hash(body["token"]),
        body["token"][:8],
    )
    assert body["token"] not in str(list(ApiToken.objects.values()))
    assert token_client(body["token"]).get("/api/me/").json()["username"] == "sam-silo"
    actions = list(
        AuditEvent.objects.order_by("id").values_list("action", "outcome", "client_address")
    )
    assert actions == [
        ("auth.sign_in", "success", "127.0.0.1"),
        ("token.created", "success", "127.0.0.1"),
    ]


def test_owners_list_create_and_revoke_their_tokens_and_a_revoked_token_stops_at_once(
    silo_user, silo_api
):
    created = silo_api.post(
        "/api/auth/tokens/", {"name": "laptop", "expires_in_days": 7}, format="json"
    )
    assert created.status_code == 201
    key, token_id = created.json()["token"], created.json()["id"]
    laptop = token_client(key)
    assert laptop.get("/api/me/").status_code == 200
    listed = {row["name"]: row for row in silo_api.get("/api/auth/tokens/").json()}
    assert set(listed) == {"default", "laptop"}
    assert "token" not in listed["laptop"] and listed["laptop"]["state"] == "active"
    assert listed["laptop"]["last_used_at"] is not None
    revoked = silo_api.post(f"/api/auth/tokens/{token_id}/revoke/")
    assert (revoked.status_code, revoked.json()["state"]) == (200, "revoked")
    refused = laptop.get("/api/me/")
    assert (refused.status_code, refused.json()) == (
        401,
        {"detail": "This token was revoked; create a new one."},
    )
    assert silo_api.get("/api/me/").status_code == 200  # the other token still works
    assert list(
        AuditEvent.objects.filter(action="token.revoked").values_list("object_id", flat=True)
    ) == [str(token_id)]


def test_an_expired_token_is_refused(silo_user):
    token, key = api_token_create(user=silo_user, name="old")
    ApiToken.objects.filter(id=token.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = token_client(key).get("/api/me/")
    assert response.status_code == 401
    assert response.json()["detail"].startswith("This token expired at ")


def test_someone_elses_token_cannot_be_revoked_or_seen(silo_user, other_silo_user, other_silo_api):
    token, key = api_token_create(user=silo_user, name="hospital")
    response = other_silo_api.post(f"/api/auth/tokens/{token.id}/revoke/")
    assert (response.status_code, response.json()) == (
        404,
        {"detail": f"You have no token with id {token.id}."},
    )
    assert ApiToken.objects.get(id=token.id).revoked_at is None
    assert "hospital" not in str(other_silo_api.get("/api/auth/tokens/").json())
    assert token_client(key).get("/api/me/").status_code == 200


def test_an_unknown_key_and_a_deactivated_users_key_are_refused(silo_user):
    token, key = api_token_create(user=silo_user, name="x")
    assert token_client("0" * 40).get("/api/me/").json() == {"detail": "Invalid token."}
    silo_user.is_active = False
    silo_user.save()
    assert token_client(key).get("/api/me/").status_code == 401


def test_a_token_lifetime_outside_the_allowed_range_is_refused(silo_api, settings):
    response = silo_api.post(
        "/api/auth/tokens/", {"name": "forever", "expires_in_days": 400}, format="json"
    )
    assert (response.status_code, response.json()) == (
        400,
        {"detail": "A token lives between 1 and 365 days, not 400."},
    )
    assert not ApiToken.objects.filter(name="forever").exists()


def test_token_endpoints_need_authentication(client, db):
    assert client.get("/api/auth/tokens/").status_code == 401
    assert client.post("/api/auth/tokens/1/revoke/").status_code == 401


def model_values(instance) -> dict:
    return {
        field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields
    }


def test_the_token_lookup_builds_the_same_token_user_and_organisation_as_the_orm_in_one_query(
    silo_user, operator, django_assert_num_queries
):
    from market.accounts.selectors import api_token_for_key

    for user in (silo_user, operator):  # with an organisation, and without one
        key = api_token_create(user=user, name="lookup")[1]
        expected = ApiToken.objects.select_related("user", "user__organisation").get(
            key_hash=api_token_hash(key)
        )
        with django_assert_num_queries(1):
            token = api_token_for_key(key=key)
            organisation = token.user.organisation  # already loaded: no second query
        assert model_values(token) == model_values(expected)
        assert model_values(token.user) == model_values(expected.user)
        if expected.user.organisation is None:
            assert organisation is None
        else:
            assert model_values(organisation) == model_values(expected.user.organisation)
