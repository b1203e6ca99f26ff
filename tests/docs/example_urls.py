"""The site's URLs plus the example page of docs/examples/page.py, for tests/docs/test_architecture_examples.py."""

from django.urls import path

from docs.examples.page import federation_classes_page
from market.urls import urlpatterns as site_urlpatterns

urlpatterns = [
    path("examples/federations/<slug:slug>/classes/", federation_classes_page),
    *site_urlpatterns,
]
