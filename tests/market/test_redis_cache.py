"""The Redis cache backend keeps one client per connection pool and still stores and reads values."""

import pytest
from django.conf import settings

from market.redis_cache import ReusedClientRedisCache


@pytest.fixture
def redis_cache():
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("needs the Redis that `make test` starts (CELERY_BROKER_URL=redis://...)")
    cache = ReusedClientRedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": "test-redis-cache"})
    yield cache
    cache.delete_many(["page", "counter"])


def test_one_redis_client_serves_every_call_of_a_cache(redis_cache):
    redis_cache.set("page", {"count": 3, "rows": [1, 2, 3]}, 60)

    assert redis_cache.get_many(["page", "counter"]) == {"page": {"count": 3, "rows": [1, 2, 3]}}
    assert redis_cache.get_or_set("counter", 1, 60) == 1
    assert redis_cache._cache.get_client(write=True) is redis_cache._cache.get_client()
