from unittest import mock

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework.test import APIClient

from market.api_schema import (
    MAX_CACHED_SCHEMAS,
    CachedSpectacularAPIView,
    cached_schemas_clear,
)

SAME_HEADERS = ["Content-Type", "Content-Disposition", "Vary", "Allow"]


@pytest.fixture(autouse=True)
def no_cached_schema():
    cached_schemas_clear()
    yield
    cached_schemas_clear()


@pytest.fixture
def generations():
    """Observes SchemaGenerator.get_schema (each call still generates the schema)."""
    with mock.patch.object(
        SchemaGenerator, "get_schema", autospec=True, side_effect=SchemaGenerator.get_schema
    ) as get_schema:
        yield get_schema


def uncached_response(path: str):
    """The response through the same middleware with drf-spectacular's own method, which generates every time."""
    with mock.patch.object(
        CachedSpectacularAPIView,
        "_get_schema_response",
        SpectacularAPIView._get_schema_response,
    ):
        return APIClient().get(path)


@pytest.mark.parametrize("query", ["", "?format=json"])
def test_a_second_schema_request_reuses_the_generated_schema(db, generations, query):
    first = APIClient().get(f"/api/schema/{query}")
    second = APIClient().get(f"/api/schema/{query}")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert generations.call_count == 1


@pytest.mark.parametrize("query", ["", "?format=json", "?format=yaml&version=2.0"])
def test_the_cached_schema_is_the_response_drf_spectacular_gives(db, generations, query):
    APIClient().get(f"/api/schema/{query}")  # fills the cache
    cached = APIClient().get(f"/api/schema/{query}")
    uncached = uncached_response(f"/api/schema/{query}")
    assert cached.status_code == uncached.status_code == 200
    assert cached.content == uncached.content
    assert [cached.get(name) for name in SAME_HEADERS] == [
        uncached.get(name) for name in SAME_HEADERS
    ]
    assert b"/api/listings/" in cached.content
    assert generations.call_count == 2  # the first request and the uncached one


def test_json_and_yaml_are_rendered_from_one_generated_schema(db, generations):
    json_schema = APIClient().get("/api/schema/?format=json")
    yaml_schema = APIClient().get("/api/schema/?format=yaml")
    assert json_schema["Content-Type"] == "application/vnd.oai.openapi+json"
    assert yaml_schema["Content-Type"] == "application/vnd.oai.openapi; charset=utf-8"
    assert generations.call_count == 1


def test_a_version_parameter_of_this_unversioned_api_is_ignored_and_generates_nothing(
    db, generations
):
    # Issue 42 item 5: each new ?version= was a schema generated afresh (and echoed into info.version).
    default = APIClient().get("/api/schema/?format=json").json()
    for number in range(3 * MAX_CACHED_SCHEMAS):
        assert APIClient().get(f"/api/schema/?format=json&version={number}").json() == default
    assert default["info"]["version"] == "0.1.0"
    assert generations.call_count == 1


@pytest.fixture
def versioned_api():
    """The API as if it had versions: ``?version=`` then names one (drf-spectacular's own rule)."""
    with mock.patch.object(
        CachedSpectacularAPIView,
        "_get_version_parameter",
        SpectacularAPIView._get_version_parameter,
    ):
        yield


def test_each_version_has_its_own_schema_where_the_api_has_versions(db, generations, versioned_api):
    default = APIClient().get("/api/schema/?format=json").json()
    versioned = APIClient().get("/api/schema/?format=json&version=2.0").json()
    assert (default["info"]["version"], versioned["info"]["version"]) == ("0.1.0", "0.1.0 (2.0)")
    assert APIClient().get("/api/schema/?format=json&version=2.0").json() == versioned
    assert generations.call_count == 2


def test_the_least_recently_used_schema_is_dropped_past_the_bound(db, generations, versioned_api):
    for number in range(MAX_CACHED_SCHEMAS + 1):
        assert APIClient().get(f"/api/schema/?version={number}").status_code == 200
    APIClient().get(f"/api/schema/?version={MAX_CACHED_SCHEMAS}")  # still kept
    assert generations.call_count == MAX_CACHED_SCHEMAS + 1
    APIClient().get("/api/schema/?version=0")  # dropped: generated again
    assert generations.call_count == MAX_CACHED_SCHEMAS + 2


def test_an_operator_and_an_anonymous_visitor_get_the_same_schema(operator_api):
    """Why the cache is not keyed by user: with SERVE_PUBLIC every endpoint is listed whoever asks."""
    anonymous = APIClient().get("/api/schema/?format=json")
    cached_schemas_clear()
    operator = operator_api.get("/api/schema/?format=json")
    assert operator.status_code == anonymous.status_code == 200
    assert operator.content == anonymous.content


def test_a_changed_setting_empties_the_cache(db, generations, settings):
    APIClient().get("/api/schema/")
    settings.SPECTACULAR_SETTINGS = {**settings.SPECTACULAR_SETTINGS, "VERSION": "9.9.9"}
    APIClient().get("/api/schema/")
    assert generations.call_count == 2
