"""Which errors are transient, and what the market does with them: broker, database and storage hiccups. The Celery
tasks (workers.tasks) retry them with backoff, and the job and validation steps let them through instead of failing
their row; a transaction PostgreSQL rolled back for a lock conflict is run again; a database too busy to answer is
a 503 with Retry-After, never a 500. Bad input is never retried. Importable before Django's apps are ready (the
task module needs it while Celery loads).

The embedded default's SQLite lets one writer at a time; settings make a writer wait for the lock (WAL, a busy
timeout, transactions that take the lock when they begin), and a request that still finds it locked is answered
503 with ``Retry-After`` (JSON under /api/), which the toolkit's client retries. ``DatabaseBusyMiddleware``
answers for views (in DEBUG too); ``market.errors.server_error`` for what fails outside a view.
"""

from functools import wraps

from django.db import InterfaceError, OperationalError, transaction
from django.http import HttpResponse, JsonResponse
from kombu.exceptions import OperationalError as BrokerError

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    BrokerError,
    ConnectionError,
    TimeoutError,
)

#: PostgreSQL's answers to transactions that crossed another's locks: serialization_failure, deadlock_detected.
#: The database rolled the transaction back, so running it again from the start is safe.
LOCK_CONFLICT_STATES = ("40001", "40P01")
LOCK_CONFLICT_ATTEMPTS = 3


def is_lock_conflict(error: BaseException) -> bool:
    return isinstance(error, OperationalError) and (
        getattr(error.__cause__, "sqlstate", None) in LOCK_CONFLICT_STATES
    )


def retried_on_lock_conflict(function):
    """Run ``function`` (a service whose transaction is the outermost) again when the database rolled it back for
    a deadlock or a serialisation failure, up to LOCK_CONFLICT_ATTEMPTS times in all. Inside a caller's
    transaction nothing is retried: that transaction was rolled back too, and its owner answers (a 503 with a
    sentence, market.errors)."""

    @wraps(function)
    def retried(*args, **kwargs):
        attempts = 1
        while True:
            try:
                return function(*args, **kwargs)
            except OperationalError as error:
                if (
                    not is_lock_conflict(error)
                    or attempts == LOCK_CONFLICT_ATTEMPTS
                    or transaction.get_connection().in_atomic_block
                ):
                    raise
                attempts += 1

    return retried


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
