"""The API docs work without internet: Swagger UI comes from our static files (drf-spectacular-sidecar), pinned."""

from django.contrib.staticfiles import finders
from django.test import Client


def test_swagger_ui_is_served_from_local_static_files_not_a_cdn(silo_user):
    client = Client()
    client.force_login(silo_user)

    response = client.get("/api/docs/")
    page = response.content.decode()
    script = client.get("/api/docs/?script=")  # the split view's start-up script

    assert response.status_code == 200
    assert "cdn.jsdelivr" not in page and "@latest" not in page
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert "cdn.jsdelivr" not in response["Content-Security-Policy"]
    assert script.status_code == 200 and "cdn.jsdelivr" not in script.content.decode()
