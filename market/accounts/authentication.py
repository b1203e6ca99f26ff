"""How API requests authenticate and how fast they may come.

``Authorization: Token <key>`` finds a named, unexpired, unrevoked ``ApiToken`` by the key's hash.
Throttling counts requests per token (per user for browser sessions, per address for anonymous
clients); DRF answers ``429`` with ``Retry-After``.
"""

from rest_framework.authentication import TokenAuthentication
from rest_framework.throttling import SimpleRateThrottle

from market.accounts.models import ApiToken
from market.accounts.selectors import api_token_for_key
from market.client_address import client_address_of


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        # Imported here: DRF loads this class while market.accounts.services (via market.errors) is importing DRF.
        from market.accounts.services import api_token_mark_used

        token = api_token_for_key(key=key)
        api_token_mark_used(token=token)
        return token.user, token


class SteadyRateThrottle(SimpleRateThrottle):
    """DRF's rate ("600/minute") as the generic cell rate algorithm: up to that many requests at once, then one
    every minute / 600 on average. The cache holds one number per client, the time its allowance is next used up
    to, instead of DRF's list of every request in the last period: at 600/minute that list (up to 600 times)
    was read, unpickled, pickled and written back on every API request."""

    cache_format = (
        "throttle-steady_%(scope)s_%(ident)s"  # not DRF's key: its lists may still be in the cache
    )

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        now = self.timer()
        interval = self.duration / self.num_requests
        used_up_to = max(self.cache.get(self.key, now), now)
        self.retry_after = used_up_to + interval - now - self.duration
        if self.retry_after > 0:
            return False
        self.cache.set(self.key, used_up_to + interval, self.duration)
        return True

    def wait(self):
        return self.retry_after


class TokenRateThrottle(SteadyRateThrottle):
    """Requests per token; a browser session counts per user."""

    scope = "token"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(SteadyRateThrottle):
    """Requests per client address without credentials (the token endpoint, signed download links)."""

    scope = "anonymous"

    def get_ident(self, request):
        return client_address_of(request) or "unknown"

    def get_cache_key(self, request, view):
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
