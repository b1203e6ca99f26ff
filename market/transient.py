"""Which errors are transient: broker, database and storage hiccups. The Celery tasks (workers.tasks) retry them
with backoff, and the job and validation steps let them through instead of failing their row. Bad input is never
retried. Importable before Django's apps are ready (the task module needs it while Celery loads)."""

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    BrokerError,
    ConnectionError,
    TimeoutError,
)
