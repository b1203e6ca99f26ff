"""Outbound HTTP for webhook deliveries, safe against a receiver that points into the market's own network.

An endpoint's host is resolved and every address checked (no loopback, link-local — which holds the cloud
metadata address 169.254.169.254 —, private, shared, multicast, reserved or unspecified address, nor an IPv6
form that maps or tunnels to one: IPv4-mapped, -compatible or -translated, 6to4, NAT64, Teredo, site-local) at
registration and again at each delivery; the delivery then connects to the very address it checked, sending the name only as
the Host header and TLS server name, so a DNS answer that changes between check and connect (DNS rebinding)
reaches nothing. Redirects are not followed and the response is read up to a cap. Each read has a timeout
(``ONEFOLD_WEBHOOK_TIMEOUT_SECONDS``) and the whole exchange a deadline (``ONEFOLD_WEBHOOK_DELIVERY_SECONDS``):
a receiver that trickles its answer a byte at a time is cut there, and the attempt counts as a failure.

Deliveries sent one after another by one worker (a dispatch) keep their connections open between POSTs
(:class:`KeptAliveConnections`): a connection is kept per checked address, port, scheme and host name, and taken
again only by a POST whose own check, made afresh, resolved to that same address; a name that resolves elsewhere
gets a new connection to its new, checked address (or a refusal). A connection is kept only when its answer was
read to its end, the receiver did not ask to close it, and the exchange finished before its deadline.

``ONEFOLD_WEBHOOK_ALLOW_PRIVATE`` lets tests (and closed deployments) reach private addresses, and
``ONEFOLD_WEBHOOK_ALLOW_HTTP`` plain HTTP.
"""

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
import urllib3.connection
from django.conf import settings

from market.errors import InvalidInput

# The cloud metadata addresses outside the ranges Python calls private or link-local.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254")})

# IPv6 ranges whose last 32 bits are an IPv4 address the packet reaches (RFC 4291 §2.5.5, RFC 2765, RFC 6052):
# they are judged by that IPv4 address, so ``[::ffff:127.0.0.1]`` is loopback as 127.0.0.1 is. 6to4 (2002::/16,
# RFC 3056) carries it in bits 16-48 instead, which ``IPv6Address.sixtofour`` reads.
IPV4_IN_LAST_32_BITS = {
    "IPv4-mapped": ipaddress.ip_network("::ffff:0:0/96"),
    "IPv4-translated": ipaddress.ip_network("::ffff:0:0:0/96"),
    "IPv4-compatible": ipaddress.ip_network("::/96"),
    "NAT64": ipaddress.ip_network("64:ff9b::/96"),
}

# IPv6 ranges refused whatever they carry: a Teredo relay (RFC 4380) or a local-use NAT64 translator (RFC 8215,
# where the IPv4 address sits at a place only its operator knows) may forward to any IPv4 host, and site-local
# addresses (RFC 3879) are private addresses that Python's ipaddress does not call private.
IPV6_RANGES_REFUSED = {
    "Teredo": ipaddress.ip_network("2001::/32"),
    "local-use NAT64": ipaddress.ip_network("64:ff9b:1::/48"),
    "site-local": ipaddress.ip_network("fec0::/10"),
}


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
    """Why an address may not be called ("" when it may). An IPv6 address that maps or tunnels to an IPv4 one
    is refused when that IPv4 address would be; the one rule for registration and every delivery."""
    if settings.ONEFOLD_WEBHOOK_ALLOW_PRIVATE:
        return ""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address) or ip.is_unspecified or ip.is_loopback:
        return _network_refusal(address, ip)
    for form, network in IPV6_RANGES_REFUSED.items():
        if ip in network:
            return f"{address} is a {form} address"
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        form, ipv4 = embedded
        refusal = _network_refusal(f"{address} (the {form} form of {ipv4})", ipv4)
        if refusal or form == "IPv4-mapped":  # a mapped address is its IPv4 host, reached over IPv4
            return refusal
    return _network_refusal(address, ip)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The name of the form and the IPv4 address that ``ip`` maps or tunnels to, if it is one of those forms."""
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    for form, network in IPV4_IN_LAST_32_BITS.items():
        if ip in network:
            return form, ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _network_refusal(named: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why ``ip`` (shown as ``named``) lies inside a network by Python's ipaddress, or is a metadata address."""
    for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
        if getattr(ip, f"is_{kind}"):
            return f"{named} is a {kind.replace('_', '-')} address"
    if ip in METADATA_ADDRESSES or not ip.is_global:
        return f"{named} is not a public address"
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


def _connection(target: Target, timeout: float) -> urllib3.connection.HTTPConnection:
    """A connection to the checked address, never to the name (which travels as Host and TLS server name)."""
    if target.scheme == "http":
        return urllib3.connection.HTTPConnection(target.address, target.port, timeout=timeout)
    return urllib3.connection.HTTPSConnection(
        target.address,
        target.port,
        timeout=timeout,
        server_hostname=target.host,
        assert_hostname=target.host,
        cert_reqs="CERT_REQUIRED",
    )


class KeptAliveConnections:
    """Open connections between the POSTs of one worker's run of deliveries, keyed by the checked target; close
    them with :meth:`close` (or use it as a context manager)."""

    def __init__(self):
        self._open: dict[tuple, urllib3.connection.HTTPConnection] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(target: Target) -> tuple:
        return (target.scheme, target.address, target.port, target.host)

    def take(self, target: Target, timeout: float) -> urllib3.connection.HTTPConnection:
        """A kept connection to the very address ``target`` was checked against, or a new one to it."""
        with self._lock:
            connection = self._open.pop(self._key(target), None)
        if connection is not None and connection.is_connected:
            connection.timeout = timeout
            return connection
        if connection is not None:  # the receiver closed it while it was kept
            connection.close()
        return _connection(target, timeout)

    def keep(self, target: Target, connection: urllib3.connection.HTTPConnection) -> None:
        with self._lock:
            previous = self._open.pop(self._key(target), None)
            self._open[self._key(target)] = connection
        if previous is not None:
            previous.close()

    def close(self) -> None:
        with self._lock:
            connections, self._open = list(self._open.values()), {}
        for connection in connections:
            connection.close()

    def __enter__(self) -> "KeptAliveConnections":
        return self

    def __exit__(self, *exception) -> None:
        self.close()


def _root_cause(error: BaseException) -> BaseException:
    """The error under urllib3's wrappers (NewConnectionError, ProtocolError, ...): what actually happened."""
    seen = error
    while True:
        inner = seen.__cause__ or (seen.args[1] if len(seen.args) > 1 else None)
        if not isinstance(inner, BaseException) or inner is seen:
            return seen
        seen = inner


def delivery_error_sentence(error: BaseException, *, target: Target, timeout: float) -> str:
    """A failed delivery in plain words for the endpoint's owner, not Python's ("NewConnectionError:
    HTTPConnection(...) [Errno 111]"): what the receiver did, and what to check."""
    where = f"{target.host}:{target.port}"
    cause = _root_cause(error)
    if isinstance(cause, ConnectionRefusedError):
        return (
            f"The receiver at {where} refused the connection: nothing listens on that port. Check that your "
            "server is running and that the address is right."
        )
    if isinstance(cause, (TimeoutError, socket.timeout)) or isinstance(
        error, urllib3.exceptions.TimeoutError
    ):
        return f"The receiver at {where} did not answer within {timeout:g} s."
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            f"The receiver at {where} presented a TLS certificate that could not be verified "
            f"({cause.verify_message or 'untrusted'}); use a certificate from a public authority for this name."
        )
    if isinstance(cause, ssl.SSLError):
        return f"The TLS handshake with the receiver at {where} failed ({cause.reason or 'no reason given'})."
    if isinstance(
        cause, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)
    ) or isinstance(error, urllib3.exceptions.ProtocolError):
        return f"The receiver at {where} closed the connection before it answered."
    if isinstance(cause, http.client.HTTPException) or isinstance(error, http.client.HTTPException):
        return f"The receiver at {where} answered with something that is not HTTP."
    if isinstance(cause, OSError) and cause.strerror:
        return f"The connection to the receiver at {where} failed: {cause.strerror.lower()}."
    return f"The delivery to the receiver at {where} failed before any answer."


class _Exchange:
    """One POST on a thread of its own, so that :func:`webhook_post` stops waiting at the deadline in whatever
    phase the exchange is (resolution, connection, TLS, sending, headers, body): a socket timeout bounds each read,
    and a receiver that sends a byte before each one ends would otherwise hold the worker for as long as it likes."""

    def __init__(
        self,
        *,
        url: str,
        body: bytes,
        headers: dict,
        timeout: float,
        response_bytes: int,
        connections: KeptAliveConnections | None = None,
    ):
        self.url, self.body, self.headers, self.connections = url, body, headers, connections
        self.timeout, self.response_bytes = timeout, response_bytes
        self.status: int | None = None
        self.error = ""
        self._connection: urllib3.connection.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._cut = False

    def run(self) -> None:
        try:
            target = webhook_target(self.url)
        except InvalidInput as refusal:
            self.error = f"Refused before connecting: {refusal}"
            return
        if self.connections is not None:
            connection = self.connections.take(target, self.timeout)
        else:
            connection = _connection(target, self.timeout)
        with self._lock:
            if self._cut:
                return
            self._connection = connection
        host_header = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
        reusable = False
        try:
            connection.request(
                "POST",
                target.path,
                body=self.body,
                headers={**self.headers, "Host": host_header, "Content-Type": "application/json"},
                preload_content=False,
            )
            response = connection.getresponse()  # no redirect is followed: a 3xx is the answer
            response.read(self.response_bytes)  # the rest is never read
            self.status = response.status
            # Kept only when the answer was read to its end (a longer one leaves bytes on the connection) and the
            # receiver did not ask to close (http.client then drops the socket: ``sock`` is None).
            reusable = response.closed and connection.sock is not None
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as error:
            self.error = delivery_error_sentence(error, target=target, timeout=self.timeout)
        finally:
            with self._lock:
                keep = reusable and not self._cut and self.connections is not None
            if keep and self.connections is not None:
                self.connections.keep(target, connection)
            else:
                connection.close()

    def cut(self) -> None:
        """Shut the connection's socket, so that a read blocked on the receiver ends now and the thread with it."""
        with self._lock:
            self._cut = True
            sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            # socket.socket's shutdown, not SSLSocket's: the TCP connection ends, whatever TLS is doing; OSError:
            # the thread closed it already.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


def webhook_post(
    *, url: str, body: bytes, headers: dict, connections: KeptAliveConnections | None = None
) -> Answer:
    """POST ``body`` to ``url`` once, checked as above, within ``ONEFOLD_WEBHOOK_DELIVERY_SECONDS`` in all; never
    raises for the receiver's failures. With ``connections``, a connection to the checked address is taken from
    and kept in them; without, each POST opens and closes its own."""
    started = time.monotonic()
    seconds = settings.ONEFOLD_WEBHOOK_DELIVERY_SECONDS
    exchange = _Exchange(
        url=url,
        body=body,
        headers=headers,
        timeout=min(settings.ONEFOLD_WEBHOOK_TIMEOUT_SECONDS, seconds),
        response_bytes=settings.ONEFOLD_WEBHOOK_RESPONSE_BYTES,
        connections=connections,
    )
    thread = threading.Thread(target=exchange.run, name="webhook-delivery", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        exchange.cut()
        status, error = (
            None,
            f"The receiver did not answer within {seconds:g} s (connection, request and response together); "
            "the market stopped waiting.",
        )
    else:
        status, error = exchange.status, exchange.error
    return Answer(status, int((time.monotonic() - started) * 1000), error[:2000])
