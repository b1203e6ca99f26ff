from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

api_patterns = [
    path("", include("market.accounts.urls")),
    path("", include("market.federations.urls")),
    path("", include("market.submissions.urls")),
    path("", include("market.jobs.urls")),
    path("", include("market.budgets.urls")),
    path("", include("market.commerce.urls")),
    path("", include("market.audit.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api_patterns)),
    path("", include("frontend.urls")),
]
