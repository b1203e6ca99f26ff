"""The catalog API reads pages as plain rows and keeps them in the cache until a listing changes."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from market.commerce.apis.listings import ListingOutput, listing_output_rows
from market.commerce.models import Listing
from market.commerce.selectors import CatalogFilters, catalog_page
from market.commerce.services import listing_create, listing_publish, listing_retire
from market.jobs.quality import catalog_flags
from tests.conftest import api_client_for


@pytest.fixture
def catalog_cache(settings):
    settings.ONEFOLD_CATALOG_CACHE_SECONDS = (
        60  # the per-process cache is enough for one test process
    )


def names(response) -> list[str]:
    return [listing["name"] for listing in response.json()["results"]]


def test_catalog_rows_give_the_same_json_as_the_listing_serializer(
    published_listing, make_global_model, operator, buyer_api
):
    first = published_listing(name="First version", price_cents=1500)
    draft = listing_create(
        global_model=make_global_model(family="xgboost"),
        name="Second version",
        description="",
        licence_text="Any lawful use.",
        price_cents=2500,
        actor=operator,
        previous_version=first,
    )
    listing_publish(listing=draft, actor=operator)
    Listing.objects.filter(pk=first.pk).update(roc_auc=None)  # a metric the model did not report

    listings = Listing.objects.select_related("federation").order_by("id")
    expected = ListingOutput(listings, many=True).data
    page = catalog_page(
        user=operator,
        filters=CatalogFilters(ordering="oldest"),
        fields=tuple(field.source.replace(".", "__") for field in ListingOutput().fields.values()),
        limit=20,
        offset=0,
        present=lambda count, rows: listing_output_rows(rows),
        presentation="rows",
    )

    assert page == expected
    assert [row["status"] for row in expected] == ["retired", "published"]
    assert expected[0]["roc_auc"] is None and expected[1]["previous_version"] == first.id
    # the API's page adds the web catalog's badges (market.jobs.quality.catalog_flags) to each row
    second = Listing.objects.get(pk=draft.pk)
    assert buyer_api.get("/api/listings/?ordering=oldest").json()["results"] == [
        {**expected[1], "quality_flags": catalog_flags(second.global_model)}
    ]


def test_catalog_pages_come_from_the_cache_until_a_listing_changes(
    catalog_cache,
    published_listing,
    make_global_model,
    operator,
    buyer_api,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=True):
        first = published_listing(name="Forest income model", price_cents=3000)
    assert names(buyer_api.get("/api/listings/")) == ["Forest income model"]

    Listing.objects.filter(pk=first.pk).update(name="Renamed behind the services' back")
    with CaptureQueriesContext(connection) as queries:
        assert names(buyer_api.get("/api/listings/")) == [
            "Forest income model"
        ]  # served from the cache
    assert not any("commerce_listing" in query["sql"] for query in queries.captured_queries)
    Listing.objects.filter(pk=first.pk).update(name="Forest income model")

    # created and published: the next page shows it
    with django_capture_on_commit_callbacks(execute=True):
        published_listing(name="Boosted income model", family="xgboost", price_cents=1000)
    assert names(buyer_api.get("/api/listings/?ordering=price")) == [
        "Boosted income model",
        "Forest income model",
    ]
    assert names(buyer_api.get("/api/listings/")) == ["Boosted income model", "Forest income model"]

    # a new version: the old one leaves the catalog
    with django_capture_on_commit_callbacks(execute=True):
        second = listing_create(
            global_model=make_global_model(family="mlp"),
            name="Forest income model v2",
            description="",
            licence_text="x",
            price_cents=3500,
            actor=operator,
            previous_version=first,
        )
    assert buyer_api.get("/api/listings/").json()["count"] == 2  # a draft is not in the catalog
    with django_capture_on_commit_callbacks(execute=True):
        listing_publish(listing=second, actor=operator)
    assert names(buyer_api.get("/api/listings/?ordering=price")) == [
        "Boosted income model",
        "Forest income model v2",
    ]

    with django_capture_on_commit_callbacks(execute=True):  # unlisted
        listing_retire(listing=Listing.objects.get(name="Boosted income model"), actor=operator)
    assert names(buyer_api.get("/api/listings/?ordering=price")) == ["Forest income model v2"]


def test_a_cached_catalog_page_never_shows_drafts_to_a_buyer(
    catalog_cache, published_listing, make_global_model, operator, operator_api, buyer_api
):
    published_listing(name="Forest income model")
    listing_create(
        global_model=make_global_model(),
        name="Draft model",
        description="",
        licence_text="x",
        price_cents=1,
        actor=operator,
    )

    assert names(operator_api.get("/api/listings/?status=draft")) == ["Draft model"]
    assert names(buyer_api.get("/api/listings/?status=draft")) == ["Forest income model"]
    assert names(operator_api.get("/api/listings/?status=draft")) == ["Draft model"]


def test_catalog_page_links_are_built_for_each_request_from_a_cached_page(
    catalog_cache, published_listing, buyer_api
):
    for price in (100, 200, 300):
        published_listing(name=f"Model at {price}", price_cents=price)

    first = buyer_api.get("/api/listings/?ordering=price&limit=1&offset=1").json()
    again = buyer_api.get(
        "/api/listings/?ordering=price&limit=1&offset=1", HTTP_HOST="localhost"
    ).json()

    assert first["count"] == 3 and [row["name"] for row in first["results"]] == ["Model at 200"]
    assert first["next"] == "http://testserver/api/listings/?limit=1&offset=2&ordering=price"
    assert again["next"] == "http://localhost/api/listings/?limit=1&offset=2&ordering=price"
    assert buyer_api.get("/api/listings/?offset=5").json() == {
        "count": 3,
        "next": None,
        "previous": "http://testserver/api/listings/?limit=20",
        "results": [],
    }


def test_a_cached_page_is_the_same_json_as_an_uncached_one_and_the_browsable_api_still_works(
    settings, published_listing, buyer_api
):
    for price in (100, 200, 300):
        published_listing(name=f"Model at {price}", price_cents=price)
    query = "/api/listings/?ordering=price&limit=2"

    settings.ONEFOLD_CATALOG_CACHE_SECONDS = 0
    uncached = buyer_api.get(query)
    settings.ONEFOLD_CATALOG_CACHE_SECONDS = 60
    read, cached = buyer_api.get(query), buyer_api.get(query)
    indented = buyer_api.get(query, HTTP_ACCEPT="application/json; indent=2")
    browsable = buyer_api.get(query, HTTP_ACCEPT="text/html")

    assert uncached.content == read.content == cached.content
    assert (cached["Content-Type"], cached["Vary"]) == (uncached["Content-Type"], uncached["Vary"])
    assert (
        cached.json()["next"] == "http://testserver/api/listings/?limit=2&offset=2&ordering=price"
    )
    assert indented.content.startswith(b'{\n  "count": 3') and indented.json() == cached.json()
    assert browsable.status_code == 200 and b"Model at 200" in browsable.content


def test_server_timing_header_separates_database_time_when_enabled(
    settings, buyer_user, published_listing
):
    published_listing()
    settings.ONEFOLD_SERVER_TIMING = True
    # a new client loads the middleware anew
    response = api_client_for(buyer_user).get("/api/listings/")

    match = re.fullmatch(
        r'db;dur=([0-9.]+);desc="([0-9]+) queries", app;dur=([0-9.]+), total;dur=([0-9.]+)',
        response["Server-Timing"],
    )
    assert match is not None
    database, queries, rest, total = (
        float(match[1]),
        int(match[2]),
        float(match[3]),
        float(match[4]),
    )
    assert queries >= 3  # the token, the count, the page
    assert database + rest == pytest.approx(total, abs=0.02)


def test_server_timing_header_is_absent_by_default(buyer_api):
    assert "Server-Timing" not in buyer_api.get("/api/listings/")


def test_a_version_moved_by_another_web_process_is_seen_at_the_next_request(
    catalog_cache, published_listing, buyer_api
):
    from django.core.cache import cache

    from market.commerce.catalog_cache import VERSION_KEY

    listing = published_listing(name="Forest income model")
    assert names(buyer_api.get("/api/listings/")) == ["Forest income model"]
    Listing.objects.filter(pk=listing.pk).update(name="Renamed")
    assert names(buyer_api.get("/api/listings/")) == [
        "Forest income model"
    ]  # this process's cached page

    cache.set(
        VERSION_KEY, "moved by another process"
    )  # what that process's catalog_changed() does on commit

    assert names(buyer_api.get("/api/listings/")) == ["Renamed"]
