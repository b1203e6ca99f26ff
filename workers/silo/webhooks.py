"""Checking a webhook delivery the market signed: ``Onefold-Signature: t=<unix seconds>,v1=<hex>``.

``v1`` is the hex HMAC-SHA256, keyed with the endpoint's secret, of ``f"{t}.{body}"`` (the timestamp, a full
stop and the raw request body, bytes as received), in the style of Stripe's signature header. A delivery is
genuine when one of its ``v1`` values (there are two while a secret is being rotated) matches and ``t`` is
within ``tolerance_seconds`` of the receiver's clock, which refuses a replay of an old delivery. Standard
library only: a receiver needs nothing else (``onefold webhook verify`` runs it from the command line).
"""

from __future__ import annotations

import hashlib
import hmac
import time

from workers.silo.errors import DataError

SIGNATURE_HEADER = "Onefold-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureInvalid(DataError):
    """The delivery's signature is missing, malformed, wrong or too old: do not act on the delivery."""


def signature_compute(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}.{body}"`` keyed with ``secret``."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The ``Onefold-Signature`` value for ``body`` signed now (or at ``timestamp``)."""
    signed_at = int(time.time()) if timestamp is None else timestamp
    return f"t={signed_at},v1={signature_compute(secret, signed_at, body)}"


def signature_verify(
    secret: str,
    header: str,
    body: bytes,
    *,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """The delivery's timestamp if ``header`` signs ``body`` with ``secret`` within ``tolerance_seconds`` of
    ``now``; :class:`SignatureInvalid` with the reason otherwise."""
    timestamps, signatures = [], []
    for part in header.split(","):
        name, separator, value = part.strip().partition("=")
        if separator and name == "t":
            timestamps.append(value)
        elif separator and name == "v1":
            signatures.append(value)
    if len(timestamps) != 1 or not timestamps[0].isdigit() or not signatures:
        raise SignatureInvalid(
            f"The {SIGNATURE_HEADER} header must read t=<unix seconds>,v1=<hex HMAC-SHA256>, not {header!r}."
        )
    timestamp = int(timestamps[0])
    expected = signature_compute(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, signature) for signature in signatures):
        raise SignatureInvalid(
            "The signature does not match the body and this secret: the delivery was not signed by the "
            "market with this endpoint's secret, or its body was changed (verify the raw bytes as received)."
        )
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance_seconds:
        raise SignatureInvalid(
            f"The delivery was signed {age:.0f} s ago, outside the tolerance of {tolerance_seconds:g} s: a "
            "replay of an old delivery, or a clock that is off."
        )
    return timestamp


__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "SIGNATURE_HEADER",
    "SignatureInvalid",
    "signature_compute",
    "signature_header",
    "signature_verify",
]
