"""Domain errors and the one handler that turns them into API responses.

Services raise these with a plain sentence for the person who caused the error; the API answers
``{"detail": <sentence>}`` with the error's status code.
"""

import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import JsonResponse
from django.views import defaults
from rest_framework.response import Response
from rest_framework.views import exception_handler

from market.transient import database_busy_response, database_is_busy, is_lock_conflict
from workers.features import TableError
from workers.modelio.base import RefusedModelError


class DomainError(Exception):
    status_code = 400


class InvalidInput(DomainError):
    """Bad input. ``field`` names the request field the sentence is about, where there is one (a page form shows
    the sentence next to that field; the API answers the sentence alone)."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class PermissionDenied(DomainError):
    status_code = 403


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class Gone(DomainError):
    """The object existed but can no longer be used (an invitation already accepted, expired or revoked)."""

    status_code = 410


class RefusedFormat(DomainError):
    status_code = 415


class TryAgain(DomainError):
    """The database rolled the request back for another that held the same rows (a deadlock or a serialisation
    failure) and retrying did not get through; nothing was done."""

    status_code = 503


class RateLimited(DomainError):
    """Too many requests of one kind in a while; ``retry_after``: whole seconds until one more would be allowed
    (the API answers it as Retry-After)."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class IdempotencyKeyReused(DomainError):
    """The same Idempotency-Key was sent before with a different request."""

    status_code = 422


def domain_error_from(error: Exception) -> DomainError | None:
    """The domain error an exception from the pure core stands for, if any."""
    if isinstance(error, DomainError):
        return error
    if isinstance(error, (TableError, RefusedModelError)):
        return InvalidInput(str(error))
    if is_lock_conflict(error):
        return TryAgain(
            "Another request changed the same records at the same moment and this one was rolled "
            "back; nothing was done. Send it again."
        )
    return None


def request_refusal(exception: Exception) -> tuple[int, str] | None:
    """Status and sentence for a request Django refused to parse (it would otherwise answer an HTML page)."""
    if isinstance(exception, TooManyFilesSent):
        return 400, (
            f"The request holds more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files; "
            "send at most that many in one upload."
        )
    if isinstance(exception, TooManyFieldsSent):
        return 400, (
            f"The request holds more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields; "
            "send at most that many."
        )
    if isinstance(exception, RequestDataTooBig):
        limit_megabytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1024**2
        return 413, (
            f"The request's fields (files aside) are larger than {limit_megabytes:g} MB; "
            "send less data or put it in a file."
        )
    return None


def api_exception_handler(exception, context):
    domain_error = domain_error_from(exception)
    if domain_error is not None:
        headers = (
            {"Retry-After": str(domain_error.retry_after)}
            if isinstance(domain_error, RateLimited)
            else None
        )
        return Response(
            {"detail": str(domain_error)}, status=domain_error.status_code, headers=headers
        )
    refusal = request_refusal(exception)
    if refusal is not None:
        return Response({"detail": refusal[1]}, status=refusal[0])
    return exception_handler(exception, context)


# Django's own error views (urls.py handler400/404/500) answer HTML; under /api/ they answer JSON too, so that
# every answer of the API, an unknown address or a request Django refused before any view included, is JSON.
API_PREFIX = "/api/"


def bad_request(request, exception):
    if not request.path.startswith(API_PREFIX):
        return defaults.bad_request(request, exception)
    status, sentence = request_refusal(exception) or (
        400,
        "The request is malformed; check its headers and body.",
    )
    return JsonResponse({"detail": sentence}, status=status)


def not_found(request, exception):
    if not request.path.startswith(API_PREFIX):
        return defaults.page_not_found(request, exception)
    return JsonResponse(
        {"detail": f"The API has no address {request.path}; see /api/docs/ for the ones it has."},
        status=404,
    )


def server_error(request):
    if database_is_busy(sys.exc_info()[1]):  # Django calls this view while handling the exception
        return database_busy_response(request)
    if not request.path.startswith(API_PREFIX):
        return defaults.server_error(request)
    return JsonResponse(
        {
            "detail": "The market failed to answer this request; try again later, and tell its "
            "operators if it keeps failing."
        },
        status=500,
    )
