"""Rates as the generic cell rate algorithm (GCRA), taken atomically from the cache.

A rate of ``count`` requests per ``period`` seconds allows ``count`` requests at once, then one every
``period / count`` seconds on average; a quiet client banks no more than that first ``count``. The cache holds
one number per client: the time its allowance is used up to. Reading and moving that number forward is one
step for every process: one Lua script in Redis (the shared cache of a deployment), or under a lock in the
process's own memory (the local-memory cache of the embedded default, which no other process sees). Several
rates are taken together or not at all, so that a request refused by one (the user's) uses none of the others
(the token's).
"""

import math
import threading
from dataclasses import dataclass

from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache import cache as default_cache
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache


@dataclass(frozen=True)
class Rate:
    """``count`` requests per ``period_seconds``, counted under one cache key; a request of ``weight`` uses
    ``weight`` of them (an estimate of five draws uses five of a federation's draws per hour)."""

    key: str
    count: int
    period_seconds: float
    weight: int = 1

    @property
    def period_microseconds(self) -> int:
        return round(self.period_seconds * 1_000_000)

    @property
    def interval_microseconds(self) -> int:
        # Rounded down, so that ``count`` intervals fit in the period: exactly ``count`` requests at once.
        return self.period_microseconds // self.count * self.weight


# Whole microseconds, so that moving an allowance forward by many intervals adds up exactly (seconds as floats
# drift, and refused a request at the very instant the rate allows it). KEYS: the rates' cache keys; ARGV: now,
# then each rate's interval and period. Returns the microseconds to wait, 0 once every allowance has moved forward.
_TAKE_SCRIPT = """
local now = tonumber(ARGV[1])
local used_up_to = {}
local wait = 0
for index = 1, #KEYS do
  local interval = tonumber(ARGV[2 * index])
  local period = tonumber(ARGV[2 * index + 1])
  used_up_to[index] = math.max(tonumber(redis.call('GET', KEYS[index])) or now, now) + interval
  wait = math.max(wait, used_up_to[index] - now - period)
end
if wait > 0 then
  return wait
end
for index = 1, #KEYS do
  local milliseconds = math.ceil((used_up_to[index] - now) / 1000)
  redis.call('SET', KEYS[index], string.format('%.0f', used_up_to[index]), 'PX', milliseconds)
end
return 0
"""

_local_lock = threading.Lock()


def rates_take(*, cache: BaseCache, rates: list[Rate], now: float) -> float:
    """Take one request from every rate at ``now`` (seconds), or from none of them.

    Returns 0 when the request is allowed, else the seconds until every rate would allow it.
    """
    now_microseconds = round(now * 1_000_000)
    if cache is default_cache:
        # ``django.core.cache.cache`` (what DRF's throttles and our callers hold) is a proxy to the default
        # backend, not a RedisCache: without this the Redis cache took the in-memory path, four round trips per
        # request and atomic only within one process.
        cache = caches[DEFAULT_CACHE_ALIAS]
    if isinstance(cache, RedisCache):
        wait = _rates_take_in_redis(cache=cache, rates=rates, now=now_microseconds)
    else:
        wait = _rates_take_in_memory(cache=cache, rates=rates, now=now_microseconds)
    return wait / 1_000_000


def _rates_take_in_memory(*, cache: BaseCache, rates: list[Rate], now: int) -> int:
    with _local_lock:
        used_up_to = [
            max(cache.get(rate.key, now), now) + rate.interval_microseconds for rate in rates
        ]
        wait = max(
            until - now - rate.period_microseconds
            for until, rate in zip(used_up_to, rates, strict=True)
        )
        if wait > 0:
            return wait
        for until, rate in zip(used_up_to, rates, strict=True):
            cache.set(rate.key, until, math.ceil((until - now) / 1_000_000))
        return 0


def _rates_take_in_redis(*, cache: RedisCache, rates: list[Rate], now: int) -> int:
    keys = [cache.make_and_validate_key(rate.key) for rate in rates]
    arguments = [now]
    for rate in rates:
        arguments += [rate.interval_microseconds, rate.period_microseconds]
    client = cache._cache.get_client(
        keys[0], write=True
    )  # the cache's own client and connection pool
    return int(client.register_script(_TAKE_SCRIPT)(keys=keys, args=arguments))
