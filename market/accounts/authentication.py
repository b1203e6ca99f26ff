"""How API requests authenticate and how fast they may come.

``Authorization: Token <key>`` finds a named, unexpired, unrevoked ``ApiToken`` by the key's hash.
Throttling counts requests per token and per user (all of a user's tokens and sessions together), and per
address for anonymous clients; DRF answers ``429`` with ``Retry-After``.
"""

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.throttling import SimpleRateThrottle

from market.accounts.models import ApiToken
from market.accounts.selectors import api_token_for_key
from market.client_address import client_address_of
from market.rate_limit import Rate, rates_take


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        # Imported here: DRF loads this class while market.accounts.services (via market.errors) is importing DRF.
        from market.accounts.services import api_token_mark_used

        token = api_token_for_key(key=key)
        api_token_mark_used(token=token)
        return token.user, token

    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None and found[1].predict_global_model_id is not None:
            _require_predict_scope(request, found[1])
        return found


#: The URL name of the one endpoint a predictions-only token may call (market.commerce.urls).
PREDICT_URL_NAME = "api-model-predict"


def _require_predict_scope(request, token: ApiToken) -> None:
    """A predictions-only token calls its model's predict endpoint and nothing else."""
    match = getattr(request._request, "resolver_match", None)
    if (
        match is None
        or match.url_name != PREDICT_URL_NAME
        or match.kwargs.get("global_model_id") != token.predict_global_model_id
    ):
        raise PermissionDenied(
            f"This token is scoped to predictions of global model #{token.predict_global_model_id}: "
            f"it can only call POST /api/global-models/{token.predict_global_model_id}/predict/."
        )


class SteadyRateThrottle(SimpleRateThrottle):
    """DRF's rate ("600/minute") as the generic cell rate algorithm (market.rate_limit): up to that many requests
    at once, then one every minute / 600 on average. The cache holds one number per client, the time its
    allowance is used up to, moved forward atomically: read-then-write let 16 concurrent clients through 878
    times where the rate allowed 700."""

    # Not DRF's key, nor the earlier non-atomic throttle's (their values may still be in the cache).
    cache_format = "throttle-gcra_%(scope)s_%(ident)s"

    def rates(self, request, view) -> list[Rate]:
        """The rates this request counts against: by default the scope's rate under get_cache_key's key."""
        key = self.get_cache_key(request, view)
        if self.rate is None or key is None:
            return []
        return [Rate(key=key, count=self.num_requests, period_seconds=self.duration)]

    def allow_request(self, request, view):
        rates = self.rates(request, view)
        if not rates:
            return True
        self.retry_after = rates_take(cache=self.cache, rates=rates, now=self.timer())
        return self.retry_after <= 0

    def wait(self):
        return self.retry_after


class TokenRateThrottle(SteadyRateThrottle):
    """Requests per token and per user: all of a user's tokens and browser sessions share the user's rate, so
    that minting tokens buys no more requests."""

    scope = "token"
    user_scope = "user"

    def rates(self, request, view) -> list[Rate]:
        if not (request.user and request.user.is_authenticated):
            return []
        count, period = self.parse_rate(self.THROTTLE_RATES[self.user_scope])
        ident = {"scope": self.user_scope, "ident": request.user.pk}
        rates = [Rate(key=self.cache_format % ident, count=count, period_seconds=period)]
        if isinstance(request.auth, ApiToken):
            rates += super().rates(request, view)
        return rates

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class AnonymousRateThrottle(SteadyRateThrottle):
    """Requests per client address without credentials (the token endpoint, signed download links)."""

    scope = "anonymous"

    def get_ident(self, request):
        return client_address_of(request) or "unknown"

    def get_cache_key(self, request, view):
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
