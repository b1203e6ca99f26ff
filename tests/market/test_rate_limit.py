"""Rates taken atomically from the cache: exactly the allowed number under concurrency, in Redis and in memory."""

import threading
import uuid
from unittest import mock

import pytest
from django.conf import settings
from django.core.cache import cache as default_cache
from django.core.cache.backends.locmem import LocMemCache

from market import rate_limit
from market.rate_limit import Rate, rates_take
from market.redis_cache import ReusedClientRedisCache

CLIENTS = 16
REQUESTS_PER_CLIENT = 40


@pytest.fixture(params=["redis", "local memory", "redis as django.core.cache.cache"])
def cache(request):
    if request.param == "local memory":
        return LocMemCache(f"rate-limit-{uuid.uuid4()}", {})
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("needs the Redis that `make test` starts (CELERY_BROKER_URL=redis://...)")
    if request.param == "redis":
        return ReusedClientRedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": "test-rate-limit"})
    # What the throttles and services hold: a proxy to the default backend, here the deployment's Redis.
    request.getfixturevalue("settings").CACHES = {
        "default": {
            "BACKEND": "market.redis_cache.ReusedClientRedisCache",
            "LOCATION": settings.CELERY_BROKER_URL,
            "KEY_PREFIX": "test-rate-limit",
        }
    }
    return default_cache


def allowed_under_concurrency(cache, rates: list[Rate], now: float) -> int:
    """How many of CLIENTS × REQUESTS_PER_CLIENT requests, all at the same instant, are allowed."""
    start = threading.Barrier(CLIENTS)
    allowed = []

    def client():
        start.wait()
        allowed.extend(
            rates_take(cache=cache, rates=rates, now=now) == 0 for _ in range(REQUESTS_PER_CLIENT)
        )

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == CLIENTS * REQUESTS_PER_CLIENT
    return sum(allowed)


def test_concurrent_clients_get_exactly_the_rate(cache):
    rate = Rate(key=f"token-{uuid.uuid4()}", count=100, period_seconds=60)
    try:
        assert allowed_under_concurrency(cache, [rate], now=1000.0) == 100
        assert rates_take(cache=cache, rates=[rate], now=1000.0) == 0.6  # one more every 60 s / 100
        assert rates_take(cache=cache, rates=[rate], now=1000.6) == 0
    finally:
        cache.delete(rate.key)


def test_rates_taken_together_are_taken_from_none_when_one_refuses(cache):
    user = Rate(key=f"user-{uuid.uuid4()}", count=2, period_seconds=60)
    tokens = [Rate(key=f"token-{uuid.uuid4()}", count=2, period_seconds=60) for _ in range(3)]
    try:
        taken = [rates_take(cache=cache, rates=[user, token], now=1000.0) for token in tokens]
        assert taken == [0, 0, 30.0]  # the user's third request waits for the user's rate
        assert allowed_under_concurrency(cache, [user, tokens[2]], now=1030.0) == 1
        assert (
            rates_take(cache=cache, rates=[tokens[2]], now=1030.0) == 0
        )  # the refusals used none of it
    finally:
        cache.delete_many([user.key, *(token.key for token in tokens)])


def test_a_quiet_client_gets_the_burst_again_not_the_credit_of_its_idle_time(cache):
    rate = Rate(key=f"token-{uuid.uuid4()}", count=3, period_seconds=60)
    try:
        assert [rates_take(cache=cache, rates=[rate], now=1000.0) for _ in range(4)] == [
            0,
            0,
            0,
            20.0,
        ]
        # An hour without requests: the whole rate at once again, and not one request more.
        assert [rates_take(cache=cache, rates=[rate], now=4600.0) for _ in range(4)] == [
            0,
            0,
            0,
            20.0,
        ]
        assert rates_take(cache=cache, rates=[rate], now=4619.0) == 1.0
        assert rates_take(cache=cache, rates=[rate], now=4620.0) == 0
    finally:
        cache.delete(rate.key)


def test_the_default_cache_proxy_takes_rates_in_one_redis_script(cache):
    """``django.core.cache.cache`` is a proxy, not a RedisCache: it once fell back to the in-memory path (four
    round trips, atomic only within one process)."""
    if cache is not default_cache:
        pytest.skip("about the default cache proxy")
    rate = Rate(key=f"token-{uuid.uuid4()}", count=3, period_seconds=60)
    try:
        with mock.patch.object(
            rate_limit, "_rates_take_in_redis", wraps=rate_limit._rates_take_in_redis
        ) as in_redis:
            assert rates_take(cache=cache, rates=[rate], now=1000.0) == 0
        assert in_redis.call_count == 1
    finally:
        cache.delete(rate.key)
