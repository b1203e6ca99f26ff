"""The API docs work without internet: Swagger UI comes from our static files (drf-spectacular-sidecar), pinned."""

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from tests.frontend.journey_helpers import page_problems, sign_in


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
    # the app's header: a way back to the market, the same navigation as every page (issue 43 item 7)
    assert '<a class="brand" href="/">Onefold</a>' in page
    assert 'id="nav-notices"' in page and "sam-silo" in page


@pytest.mark.browser
def test_the_api_docs_have_no_serious_accessibility_violation(
    live_server, transactional_db, page, silo_user
):
    sign_in(page, live_server.url, "sam-silo", "silo-password")
    problems = []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/api/docs/")
        page.locator(".opblock").first.wait_for()
        assert page.evaluate("document.documentElement.lang") == "en"
        problems += page_problems(page, f"/api/docs/ @{width}px")
        page.locator(".opblock-summary-control").first.click()  # one operation opened
        page.locator(".opblock-body").first.wait_for()
        problems += page_problems(page, f"/api/docs/ one operation open @{width}px")
    assert problems == []


@pytest.mark.browser
def test_the_api_docs_carry_the_apps_header_and_its_brand_leads_back_to_the_market(
    live_server, transactional_db, page, silo_user
):
    sign_in(page, live_server.url, "sam-silo", "silo-password")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/api/docs/")
        page.locator(".opblock").first.wait_for()
        header = page.locator("header.site-header")
        assert header.is_visible()
        box = header.bounding_box()
        assert box["y"] == 0 and box["width"] <= width  # on top, no sideways scrolling
        if width == 390:  # the narrow menu opens as on every page
            page.locator(".menu-button").click()
            assert page.locator("#site-menu a", has_text="Notices").is_visible()
        page.locator("header.site-header a.brand").click()
        page.wait_for_url(f"{live_server.url}/")
        assert page.locator("h1").first.is_visible()
