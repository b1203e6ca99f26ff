"""Onefold's silo toolkit: a client for the market's REST API and the ``python -m workers.silo`` tool.

It trains FedKT students on a silo's own machine (the data never leaves it) with the pure core
(``workers.features``, ``workers.algorithms``, ``workers.privacy``, ``workers.modelio``) and talks to
the market over HTTP only; it never imports the server's dependencies (Django, Celery). See
docs/toolkit.md.
"""

from workers.silo.client import ModelUpload, OnefoldClient
from workers.silo.errors import (
    ApiError,
    AuthenticationFailed,
    ConfigurationError,
    Conflict,
    DataError,
    InvalidRequest,
    MarketUnreachable,
    NotFound,
    OnefoldError,
    PayloadTooLarge,
    PermissionDenied,
    Rejected,
    ServerError,
    TimedOut,
    UnsupportedFormat,
)

__all__ = [
    "ApiError",
    "AuthenticationFailed",
    "ConfigurationError",
    "Conflict",
    "DataError",
    "InvalidRequest",
    "MarketUnreachable",
    "ModelUpload",
    "NotFound",
    "OnefoldClient",
    "OnefoldError",
    "PayloadTooLarge",
    "PermissionDenied",
    "Rejected",
    "ServerError",
    "TimedOut",
    "UnsupportedFormat",
]
