"""The client's address, for the audit log, sign-in limits and throttles.

Without proxies it is ``REMOTE_ADDR``. Behind ``ONEFOLD_TRUSTED_PROXIES`` reverse proxies, each appending
the address it was reached from to ``X-Forwarded-For``, it is the entry that many places from the right:
entries further left were sent by the client itself and can be anything. A value that is not an IP
address falls back to ``REMOTE_ADDR``.

``ClientAddressMiddleware`` keeps the current request's address for services that record audit events
without being handed the request (uploads, jobs, purchases...).
"""

import contextvars
import ipaddress

from django.conf import settings

_current_client_address: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "client_address", default=None
)


def _ip_address(value: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((value or "").strip()))
    except ValueError:
        return None


def client_address_of(request) -> str | None:
    if request is None:
        return None
    remote_address = _ip_address(request.META.get("REMOTE_ADDR"))
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    proxies = settings.ONEFOLD_TRUSTED_PROXIES
    if not proxies or not forwarded:
        return remote_address
    hops = forwarded.split(",")
    return _ip_address(hops[-min(proxies, len(hops))]) or remote_address


def current_client_address() -> str | None:
    """The address of the request being answered in this thread, or None outside a request (a worker)."""
    return _current_client_address.get()


class ClientAddressMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _current_client_address.set(client_address_of(request))
        try:
            return self.get_response(request)
        finally:
            _current_client_address.reset(token)
