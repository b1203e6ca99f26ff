from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

from market.errors import request_refusal
from market.json_input import NUL, NotJSON, json_text_parse, read_as_json

# Bodies the API reads whole into memory; multipart uploads stream through market.uploads instead, and CSV
# bodies for predictions through the prediction API's own bounded parser.
STREAMED_CONTENT_TYPES = ("multipart/form-data", "text/csv")


def body_too_large_response() -> JsonResponse:
    status, sentence = request_refusal(RequestDataTooBig())
    return JsonResponse({"detail": sentence}, status=status)


def _declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:  # Django reads a malformed Content-Length as an empty body too
        return 0


def _json_body_problem(request) -> str | None:
    try:
        json_text_parse(request.body)
    except NotJSON:  # not JSON after all: the API's parser answers that with its own 400
        return None
    except ValueError as refusal:
        return str(refusal)
    return None


class RefuseUnstorableInputMiddleware:
    """Answer a JSON 4xx to a request the market cannot read or store, before any view sees it.

    A NUL character in the path or query string (PostgreSQL text cannot store it, so a filter such as
    ``?search=a%00b`` would otherwise end as a database error deep inside a query); a body read whole into
    memory that is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413); a body the API may read as JSON (a JSON
    Content-Type or a wildcard such as ``*/*``) that :func:`market.json_input.json_text_parse` refuses (NUL,
    non-finite numbers, integers beyond 64 bits, deep nesting). JSON text inside form fields is checked by
    :class:`market.json_input.CheckedJSONField`.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path or any(
            NUL in key or any(NUL in value for value in values)
            for key, values in request.GET.lists()
        ):
            return JsonResponse(
                {
                    "detail": "The address contains a NUL character (%00), which no parameter "
                    "accepts; remove it."
                },
                status=400,
            )
        if request.method in ("POST", "PUT", "PATCH") and not request.content_type.startswith(
            STREAMED_CONTENT_TYPES
        ):
            if _declared_length(request) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                return body_too_large_response()
            if read_as_json(request.content_type):
                try:
                    problem = _json_body_problem(request)
                except RequestDataTooBig:
                    return body_too_large_response()
                if problem:
                    return JsonResponse({"detail": problem}, status=400)
        return self.get_response(request)
