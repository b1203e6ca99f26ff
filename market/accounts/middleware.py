import json

from django.http import JsonResponse

NUL = "\x00"
JSON_BODY_LIMIT = 10 * 1024**2  # JSON bodies are small; uploads are multipart and their fields are checked by forms


def _holds_nul(value) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def _json_body_holds_nul(request) -> bool:
    if not request.content_type.endswith("json") or int(request.META.get("CONTENT_LENGTH") or 0) > JSON_BODY_LIMIT:
        return False
    try:
        return _holds_nul(json.loads(request.body))
    except ValueError:  # not JSON after all: the API's parser answers that with its own 400
        return False


class RefuseNullCharactersMiddleware:
    """Answer 400 to a request whose path, query string or JSON body holds a NUL character.

    PostgreSQL text and jsonb cannot store NUL, so a filter such as ``?search=a%00b`` or a JSON field
    value with ``\\u0000`` would otherwise end as a database error (a 500) deep inside a query. Form
    fields are already checked by Django's and DRF's fields; raw query parameters, paths and free-form
    JSON (dicts of parameters) are checked once here.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path or any(NUL in key or any(NUL in value for value in values)
                                      for key, values in request.GET.lists()):
            return JsonResponse({"detail": "The address contains a NUL character (%00), which no parameter "
                                           "accepts; remove it."}, status=400)
        if request.method in ("POST", "PUT", "PATCH") and _json_body_holds_nul(request):
            return JsonResponse({"detail": "The request body contains a NUL character (\\u0000), which no field "
                                           "accepts; remove it."}, status=400)
        return self.get_response(request)
