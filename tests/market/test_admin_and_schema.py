import pytest
from django.core.management import call_command

ADMIN_PAGES = [
    "accounts/organisation",
    "accounts/user",
    "federations/federation",
    "federations/publicdataset",
    "federations/evaluationsplit",
    "submissions/submission",
]


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_operator_sees_every_model_in_the_admin(client, operator, federation_with_data, page):
    client.force_login(operator)
    assert client.get(f"/admin/{page}/").status_code == 200


def test_silo_user_cannot_open_the_admin(client, silo_user):
    client.force_login(silo_user)
    assert client.get("/admin/federations/federation/").status_code == 302


def test_openapi_schema_is_valid_and_warning_free(db, tmp_path):
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")
    )
    schema = (tmp_path / "schema.yml").read_text()
    assert "/api/federations/{slug}/public-dataset/features.npz" in schema
