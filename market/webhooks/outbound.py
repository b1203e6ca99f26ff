"""Outbound HTTP for webhook deliveries, safe against a receiver that points into the market's own network.

An endpoint's host is resolved and every address checked (no loopback, link-local — which holds the cloud
metadata address 169.254.169.254 —, private, shared, multicast, reserved or unspecified address) at registration
and again at each delivery; the delivery then connects to the very address it checked, sending the name only as
the Host header and TLS server name, so a DNS answer that changes between check and connect (DNS rebinding)
reaches nothing. Redirects are not followed, the whole call has a timeout and the response is read up to a cap.

``ONEFOLD_WEBHOOK_ALLOW_PRIVATE`` lets tests (and closed deployments) reach private addresses, and
``ONEFOLD_WEBHOOK_ALLOW_HTTP`` plain HTTP.
"""

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from django.conf import settings

from market.errors import InvalidInput

# The cloud metadata addresses outside the ranges Python calls private or link-local.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254")})


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str  # the resolved address that was checked and is connected to


@dataclass(frozen=True)
class Answer:
    status: int | None
    latency_ms: int
    error: str = ""


def address_refusal(address: str) -> str:
    """Why an address may not be called ("" when it may)."""
    ip = ipaddress.ip_address(address)
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    if settings.ONEFOLD_WEBHOOK_ALLOW_PRIVATE:
        return ""
    for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{kind}"):
            return f"{address} is a {kind.replace('_', '-')} address"
    if ip in METADATA_ADDRESSES or not ip.is_global:
        return f"{address} is not a public address"
    return ""


def webhook_target(url: str) -> Target:
    """Parse, resolve and check ``url``; raises InvalidInput with what to fix."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as error:
        raise InvalidInput(f"The webhook URL cannot be read: {error}.", field="url") from error
    allowed = ("https", "http") if settings.ONEFOLD_WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in allowed:
        raise InvalidInput("A webhook URL must start with https://.", field="url")
    if not parts.hostname or parts.username or parts.password:
        raise InvalidInput(
            "A webhook URL needs a host name and no user name or password.", field="url"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = {
            info[4][0] for info in socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        }
    except (OSError, ValueError, UnicodeError) as error:
        raise InvalidInput(
            f"The webhook host '{parts.hostname}' could not be resolved ({error}).", field="url"
        ) from error
    refusals = sorted(filter(None, (address_refusal(address) for address in addresses)))
    if refusals:
        raise InvalidInput(
            f"The webhook host '{parts.hostname}' resolves to an address the market does not call: "
            f"{refusals[0]}. Use a public HTTPS address.",
            field="url",
        )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, sorted(addresses)[0])


def _pool(target: Target, timeout: float):
    common = {"timeout": urllib3.Timeout(total=timeout), "retries": False, "maxsize": 1}
    if target.scheme == "http":
        return urllib3.HTTPConnectionPool(target.address, target.port, **common)
    return urllib3.HTTPSConnectionPool(
        target.address,
        target.port,
        server_hostname=target.host,
        assert_hostname=target.host,
        cert_reqs="CERT_REQUIRED",
        **common,
    )


def webhook_post(*, url: str, body: bytes, headers: dict) -> Answer:
    """POST ``body`` to ``url`` once, checked as above; never raises for the receiver's failures."""
    started = time.monotonic()

    def answer(status: int | None, error: str = "") -> Answer:
        return Answer(status, int((time.monotonic() - started) * 1000), error[:2000])

    try:
        target = webhook_target(url)
    except InvalidInput as refusal:
        return answer(None, f"Refused before connecting: {refusal}")
    host_header = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
    pool = _pool(target, settings.ONEFOLD_WEBHOOK_TIMEOUT_SECONDS)
    try:
        response = pool.urlopen(
            "POST",
            target.path,
            body=body,
            headers={**headers, "Host": host_header, "Content-Type": "application/json"},
            redirect=False,
            preload_content=False,
            assert_same_host=False,
        )
        response.read(settings.ONEFOLD_WEBHOOK_RESPONSE_BYTES)  # the rest is never read
        response.release_conn()
        return answer(response.status)
    except urllib3.exceptions.HTTPError as error:
        return answer(None, f"{type(error).__name__}: {error}")
    finally:
        pool.close()
