def test_token_api_exchanges_a_password_for_a_token(silo_user, client):
    response = client.post(
        "/api/auth/token/", {"username": "sam-silo", "password": "silo-password"}
    )
    assert response.status_code == 200
    assert len(response.json()["token"]) == 40


def test_token_api_refuses_a_wrong_password(silo_user, client):
    response = client.post("/api/auth/token/", {"username": "sam-silo", "password": "wrong"})
    assert response.status_code == 400
    assert "Unable to log in" in response.json()["non_field_errors"][0]


def test_me_api_requires_a_token(client, db):
    response = client.get("/api/me/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_me_api_describes_the_user_and_organisation(silo_api, silo_user):
    assert silo_api.get("/api/me/").json() == {
        "username": "sam-silo",
        "is_operator": False,
        "organisation": {
            "id": silo_user.organisation_id,
            "name": "Northwind Hospital",
            "is_silo": True,
            "is_buyer": False,
        },
    }


def test_schema_and_docs_are_served(silo_api):
    schema = silo_api.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/submissions/" in schema.content
    assert silo_api.get("/api/docs/").status_code == 200
