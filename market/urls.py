from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from market.api_schema import CachedSpectacularAPIView
from market.toolkit.urls import api_urlpatterns as toolkit_api_patterns

# Swagger UI is served from our own static files (drf-spectacular-sidecar, pinned); it sets inline styles.
SWAGGER_UI_POLICY = {"style-src": ["'unsafe-inline'"]}

api_patterns = [
    path("", include("market.accounts.urls")),
    path("", include("market.federations.urls")),
    path("", include("market.submissions.urls")),
    path("", include("market.jobs.urls")),
    path("", include("market.budgets.urls")),
    path("", include("market.commerce.urls")),
    path("", include("market.audit.urls")),
    path("", include("market.exchanges.urls")),
    path("", include("market.augmentations.urls")),
    path("", include("market.invitations.urls")),
    path("", include("market.webhooks.urls")),
    path("", include(toolkit_api_patterns)),
    path("schema/", CachedSpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file (no inline script); Swagger UI comes from the sidecar.
    path(
        "docs/",
        csp_update(SWAGGER_UI_POLICY)(
            SpectacularSwaggerSplitView.as_view(
                url_name="api-schema", template_name="frontend/api_docs.html"
            )
        ),
        name="api-docs",
    ),
]

handler400 = "market.errors.bad_request"
handler404 = "market.errors.not_found"
handler500 = "market.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
    path("toolkit/", include("market.toolkit.urls")),
    path("", include("frontend.urls")),
]
