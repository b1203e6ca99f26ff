"""Where a request's time goes: a ``Server-Timing`` header with the database's share, when asked for.

With ``ONEFOLD_SERVER_TIMING=true`` every response carries
``Server-Timing: db;dur=1.20;desc="3 queries", app;dur=2.35, total;dur=3.55`` (milliseconds): ``db`` is the time
spent in SQL statements on the default connection (sent and answered), ``app`` everything else from the first
middleware to the response (Django, DRF, serialisation, the cache), ``total`` their sum. Browsers' developer tools
and ``benchmarks/catalog.py`` read it. Off by default: the header tells whoever reads it how fast the database is.
"""

import time

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import connection


class DatabaseTime:
    """An ``execute_wrapper`` that adds up the time and number of the statements it wraps."""

    def __init__(self):
        self.seconds = 0.0
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.queries += 1


def server_timing_header(*, total_seconds: float, database: DatabaseTime) -> str:
    return (
        f'db;dur={1000 * database.seconds:.2f};desc="{database.queries} queries", '
        f"app;dur={1000 * (total_seconds - database.seconds):.2f}, total;dur={1000 * total_seconds:.2f}"
    )


class ServerTimingMiddleware:
    def __init__(self, get_response):
        if not settings.ONEFOLD_SERVER_TIMING:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request):
        database = DatabaseTime()
        started = time.perf_counter()
        with connection.execute_wrapper(database):
            response = self.get_response(request)
        response["Server-Timing"] = server_timing_header(
            total_seconds=time.perf_counter() - started, database=database
        )
        return response
