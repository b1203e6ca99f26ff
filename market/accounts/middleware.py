from django.http import JsonResponse


class RefuseNullCharactersMiddleware:
    """Answer 400 to a request whose path or query string holds a NUL character.

    PostgreSQL text cannot store NUL, so a filter such as ``?search=a%00b`` would otherwise end as a
    database error (a 500) deep inside a query. Form and JSON fields are already checked by their
    serializers; query parameters and paths are read raw by many views, so they are checked once here.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or any("\x00" in key or any("\x00" in value for value in values)
                                         for key, values in request.GET.lists()):
            return JsonResponse({"detail": "The address contains a NUL character (%00), which no parameter "
                                           "accepts; remove it."}, status=400)
        return self.get_response(request)
