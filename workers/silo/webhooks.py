"""Signed webhook deliveries: the signature the market sends and the check a receiver runs.

Each delivery is a JSON body sent with ``Onefold-Signature: t=<unix seconds>,v1=<hex>``, where the hex is
HMAC-SHA256 with the endpoint's secret over ``f"{t}.{raw body}"`` (the scheme of Stripe's signature header). The
timestamp is signed so that a captured delivery cannot be replayed later than ``tolerance`` seconds; a rotated
secret makes the header carry one ``v1`` per secret still accepted, and any one of them may match.

Pure: the market signs with :func:`webhook_signature_header`, and the toolkit (``onefold webhook verify``) and any
receiver check with :func:`webhook_signature_verify`; neither imports the market.
"""

import hashlib
import hmac
import time

from workers.silo.errors import DataError

SIGNATURE_HEADER = "Onefold-Signature"
EVENT_HEADER = "Onefold-Event"
DELIVERY_HEADER = "Onefold-Delivery"
DEFAULT_TOLERANCE_SECONDS = 300


class WebhookSignatureInvalid(DataError):
    """A delivery whose signature header is missing, malformed, stale or does not match the body: do not act on
    it (``onefold webhook verify`` exits 3 with the sentence)."""


def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}.{body}"`` under ``secret`` (the ``v1`` value)."""
    signed = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def webhook_signature_header(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The ``Onefold-Signature`` header value for ``body`` sent at ``timestamp`` (unix seconds; default now)."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={webhook_signature(secret, timestamp, body)}"


def _parsed(header: str) -> tuple[int, list[str]]:
    timestamp, signatures = None, []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdecimal():
            timestamp = int(value)
        elif name == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise WebhookSignatureInvalid(
            f"The {SIGNATURE_HEADER} header must read 't=<unix seconds>,v1=<hex>'."
        )
    return timestamp, signatures


def webhook_signature_verify(
    secret: str,
    header: str,
    body: bytes,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """Check a delivery: the header's timestamp is within ``tolerance`` seconds of ``now`` (default: the clock)
    and one of its ``v1`` signatures is the body's under ``secret``. Returns the signed timestamp; raises
    :class:`WebhookSignatureInvalid` with a sentence saying what is wrong otherwise.

    ``body`` must be the raw bytes received, before any JSON parsing: re-serialised JSON does not match.
    """
    timestamp, signatures = _parsed(header or "")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookSignatureInvalid(
            f"The delivery was signed at {timestamp}, more than {tolerance} s from now ({int(current)}); "
            "refuse it as a possible replay, or check this machine's clock."
        )
    expected = webhook_signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, signature) for signature in signatures):
        raise WebhookSignatureInvalid(
            "The signature does not match the body under this secret: the body was changed, or the "
            "secret is not this endpoint's (it changes when the secret is rotated)."
        )
    return timestamp
