"""Which errors are transient: broker, database and storage hiccups. The Celery tasks (workers.tasks) retry them
with backoff, and the job and validation steps let them through instead of failing their row. Bad input is never
retried. Importable before Django's apps are ready (the task module needs it while Celery loads)."""

from functools import wraps

from django.db import InterfaceError, OperationalError, transaction
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
