"""What one cached catalog request costs in round trips to PostgreSQL and Redis, with the deployment's Redis
cache (issue 42 item 5): the token's lookup, the throttle's one script and the page with its version."""

import uuid

import pytest
import redis
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext


@pytest.fixture
def redis_cache(settings, monkeypatch):
    """The shared Redis cache of a deployment, under a key prefix of this test's own; every command sent counted
    (a pipeline as one round trip)."""
    broker = settings.CELERY_BROKER_URL
    settings.CACHES = {
        "default": {
            "BACKEND": "market.redis_cache.ReusedClientRedisCache",
            "LOCATION": broker,
            "KEY_PREFIX": f"round-trips-{uuid.uuid4().hex}",
        }
    }
    settings.ONEFOLD_CATALOG_CACHE_SECONDS = 60
    sent: list[str] = []
    real_execute = redis.Redis.execute_command
    real_pipeline = redis.client.Pipeline.execute

    def execute_command(self, *arguments, **options):
        sent.append(str(arguments[0]))
        return real_execute(self, *arguments, **options)

    def pipeline_execute(self, *arguments, **options):
        sent.append("PIPELINE")
        return real_pipeline(self, *arguments, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", execute_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", pipeline_execute)
    yield sent
    caches["default"].clear()


def test_a_cached_catalog_request_costs_one_sql_statement_and_two_redis_round_trips(
    redis_cache, published_listing, buyer_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        published_listing(name="Forest income model", price_cents=3000)
    for _ in range(
        2
    ):  # the first reads the database and fills the cache; the second learns the version
        assert buyer_api.get("/api/listings/").status_code == 200
    redis_cache.clear()

    with CaptureQueriesContext(connection) as queries:
        response = buyer_api.get("/api/listings/")

    assert response.status_code == 200
    assert [listing["name"] for listing in response.json()["results"]] == ["Forest income model"]
    assert len(queries.captured_queries) == 1, [query["sql"] for query in queries.captured_queries]
    assert "accounts_apitoken" in queries.captured_queries[0]["sql"]
    assert redis_cache == [
        "EVALSHA",
        "MGET",
    ]  # the throttle's script, then the version with its page
