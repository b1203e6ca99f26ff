"""Catalog pages in the cache for as long as no listing changes.

A page is kept under a key made of the catalog's *version*, the audience (what decides which listings a viewer
sees: operators any status, everyone else published listings only, as ``listing_list`` says) and the request
(filters, fields, limit, offset, and for a rendered page its address and media type). Every service that writes a listing calls :func:`catalog_changed` inside its
transaction; when that transaction commits, the version moves on, so the next request after a change misses and
reads the database. Pages of old versions are never read again and expire after ``ONEFOLD_CATALOG_CACHE_SECONDS``,
which also bounds how long a change made outside the services (a shell, a migration) can go unseen.

The version lives in the cache itself, so caching needs a cache that every web process shares (Redis,
``ONEFOLD_CACHE_URL``): with per-process memory, a version moved by one process would not reach the others. The
setting therefore defaults to 0 (off) without ``ONEFOLD_CACHE_URL``.
"""

import hashlib
import secrets
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

VERSION_KEY = "catalog:version"
Page = TypeVar("Page")


def _new_version() -> str:
    return secrets.token_hex(8)


def catalog_version() -> str:
    return cache.get_or_set(VERSION_KEY, _new_version, timeout=None)


def catalog_changed() -> None:
    """Call inside the transaction that writes a listing: cached pages are dropped once it commits."""
    transaction.on_commit(lambda: cache.set(VERSION_KEY, _new_version(), timeout=None))


def _page_key(version: str, request_key: tuple) -> str:
    return "catalog:page:" + hashlib.sha256(repr((version, request_key)).encode()).hexdigest()


# The version this process read last: it asks for the version and that version's page in one round trip, and
# serves the page only if the version it got back is the same.
_seen_version = [""]


def catalog_cached(request_key: tuple, read: Callable[[], Page]) -> Page:
    """``read()``'s result for ``request_key`` (plain values with a stable ``repr``) at the current version."""
    seconds = settings.ONEFOLD_CATALOG_CACHE_SECONDS
    if not seconds:
        return read()
    guess = _seen_version[0]
    found = cache.get_many([VERSION_KEY, _page_key(guess, request_key)]) if guess else {}
    version = found.get(VERSION_KEY) or catalog_version()
    _seen_version[0] = version
    key = _page_key(version, request_key)
    page = found.get(key) if version == guess else cache.get(key)
    if page is None:
        page = read()
        cache.set(key, page, seconds)
    return page
