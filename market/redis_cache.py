"""Django's Redis cache with one Redis client per connection pool instead of one per cache call.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` for every operation, and redis-py's
constructor copies its table of several hundred response callbacks each time: about a tenth of a cached catalog
request's CPU (three cache calls: the throttle's read and write, the catalog page). A client shares its pool's
connections and is safe to share between threads, so one per pool is kept.
"""

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class ReusedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ReusedClientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
