"""A database too busy to answer: 503 with Retry-After, never a 500.

The embedded default's SQLite lets one writer at a time; settings make a writer wait for the lock (WAL, a busy
timeout, transactions that take the lock when they begin), and a request that still finds it locked is answered
503 with ``Retry-After`` (JSON under /api/), which the toolkit's client retries. ``DatabaseBusyMiddleware``
answers for views (in DEBUG too); ``market.errors.server_error`` for what fails outside a view.
"""

from django.db import OperationalError
from django.http import HttpResponse, JsonResponse

RETRY_AFTER_SECONDS = 2
SENTENCE = "The market's database is busy with other requests; try again in a few seconds."


def database_is_busy(exception: BaseException | None) -> bool:
    """Whether the exception is SQLite's refusal of a write while another connection holds the lock."""
    return isinstance(exception, OperationalError) and "database is locked" in str(exception)


def database_busy_response(request) -> HttpResponse:
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": SENTENCE}, status=503)
    else:
        response = HttpResponse(SENTENCE, content_type="text/plain; charset=utf-8", status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseBusyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return database_busy_response(request) if database_is_busy(exception) else None
