"""The toolkit's errors: every one carries a sentence that says what to fix, and an exit code.

Errors the market answered carry its message (``detail`` or the per-field lists of the API) and
its HTTP status; errors found on the silo's own machine (its data, its configuration) carry no
status. The command-line tool prints the sentence and exits with :attr:`OnefoldError.exit_code`.
"""

from __future__ import annotations

EXIT_ERROR = 1  # anything not listed below
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_DATA = 3  # the silo's data or files cannot be used as given
EXIT_AUTH = 4  # not logged in, bad credentials, a token for another market
EXIT_REFUSED = 5  # the market refused the request (4xx other than 401)
EXIT_UNAVAILABLE = 6  # the market could not be reached or failed (5xx) after retries
EXIT_REJECTED = (
    7  # the market processed the request and said no: a rejected submission, a failed job
)
EXIT_TIMED_OUT = (
    8  # waiting for the market (validation, a job) took longer than the --wait-timeout given
)


class OnefoldError(Exception):
    """Base class. ``message`` is the sentence for the user; ``status`` the HTTP status, if any."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, status: int | None = None, payload=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.payload = payload

    def __str__(self) -> str:
        return self.message


class DataError(OnefoldError):
    """The silo's table cannot be trained on as given (columns, labels, too few rows)."""

    exit_code = EXIT_DATA


class ConfigurationError(OnefoldError):
    """No stored login, or a stored token that belongs to another market."""

    exit_code = EXIT_AUTH


class ApiError(OnefoldError):
    """The market answered with an error status; ``status`` and the server's message are kept."""

    exit_code = EXIT_REFUSED


class InvalidRequest(ApiError):
    """400: the market refused the input."""


class AuthenticationFailed(ApiError):
    """401: missing, wrong or revoked credentials."""

    exit_code = EXIT_AUTH


class PermissionDenied(ApiError):
    """403: the account may not do this."""


class NotFound(ApiError):
    """404: no such thing, or not visible to this account."""


class Conflict(ApiError):
    """409: a duplicate, or the state does not allow it (e.g. an exhausted budget)."""


class PayloadTooLarge(ApiError):
    """413: the upload exceeds the market's limit."""


class UnsupportedFormat(ApiError):
    """415: a model format the market refuses (pickle and friends)."""


class ServerError(ApiError):
    """5xx after every retry."""

    exit_code = EXIT_UNAVAILABLE


class MarketUnreachable(OnefoldError):
    """No connection to the market after every retry."""

    exit_code = EXIT_UNAVAILABLE


class Rejected(OnefoldError):
    """The market finished processing and said no: a rejected submission or a failed job."""

    exit_code = EXIT_REJECTED


class TimedOut(OnefoldError):
    """Waiting for the market (validation, a job) took longer than allowed; it may still finish."""

    exit_code = EXIT_TIMED_OUT


ERRORS_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedFormat,
}


def error_for_status(status: int, message: str, payload=None) -> ApiError:
    """The :class:`ApiError` subclass for an HTTP status (``ServerError`` for 5xx, ``ApiError`` otherwise)."""
    kind = ServerError if status >= 500 else ERRORS_BY_STATUS.get(status, ApiError)
    return kind(message, status=status, payload=payload)


__all__ = [
    "ApiError",
    "AuthenticationFailed",
    "ConfigurationError",
    "Conflict",
    "DataError",
    "InvalidRequest",
    "MarketUnreachable",
    "NotFound",
    "OnefoldError",
    "PayloadTooLarge",
    "PermissionDenied",
    "Rejected",
    "ServerError",
    "TimedOut",
    "UnsupportedFormat",
    "error_for_status",
    "EXIT_AUTH",
    "EXIT_DATA",
    "EXIT_ERROR",
    "EXIT_REFUSED",
    "EXIT_REJECTED",
    "EXIT_TIMED_OUT",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
]
