"""The app's own error pages: every HTML answer of 400, 403, 404 or 500 outside /api/ is a page of the app, with
the signed-in role's way back (its start page) or the sign-in page — also where Django would have answered with
its own page (an unknown address, a refused request, a failed CSRF check) or, with ``DEBUG`` on as in the demo,
with its debug page. Under /api/ such an answer is the API's JSON (market.errors), in ``DEBUG`` too."""

from django.http import JsonResponse
from django.shortcuts import render

from market import errors

#: What each status says; a view that renders its own error page (frontend.decorators) says more.
SENTENCES = {
    400: "The market could not read this request. Go back, reload the page and try again.",
    403: "You are not allowed to see or do this.",
    404: "There is no page at this address. It may have been moved, or the link may be mistyped.",
    500: "The market failed to answer this request. Try again later, and tell its operators if it keeps failing.",
}
#: In the ``<html>`` element of every page the app renders (frontend/base.html): what this module leaves alone.
PAGE_MARK = b"data-onefold-page"


def error_page(request, status: int, message: str | None = None):
    return render(
        request,
        "frontend/error.html",
        {"message": message or SENTENCES[status], "status_code": status},
        status=status,
    )


def _api_answer(request, status: int):
    if status == 404:
        return errors.not_found(request, None)
    if status == 500:
        return errors.server_error(request)
    if status == 400:
        return errors.bad_request(request, None)
    return JsonResponse({"detail": "You are not allowed to do this."}, status=403)


def csrf_failure(request, reason: str = ""):
    """settings.CSRF_FAILURE_VIEW: a form sent without this browser's CSRF token (an old page, another site)."""
    if request.path.startswith(errors.API_PREFIX):
        return JsonResponse(
            {"detail": "CSRF check failed: send the X-CSRFToken header, or use an API token."},
            status=403,
        )
    return error_page(
        request,
        403,
        "This form has expired or was sent from another site. Reload the page and send it again.",
    )


class AppErrorPagesMiddleware:
    """Replace an HTML error answer that is not a page of the app (Django's default and debug pages) by the app's
    page for its status, or under /api/ by the API's JSON. Placed outside the session and authentication middleware
    so that the page knows who is signed in."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code not in SENTENCES
            or response.streaming
            or not response.get("Content-Type", "").startswith("text/html")
            or PAGE_MARK in response.content
        ):
            return response
        if request.path.startswith(errors.API_PREFIX):
            return _api_answer(request, response.status_code)
        try:
            return error_page(request, response.status_code)
        except Exception:  # noqa: BLE001 (the page needs the database; if it cannot be made, Django's stays)
            return response
