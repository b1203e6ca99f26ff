"""Answers made for one viewer are never stored by a shared cache.

Every answer a view makes, API and pages alike, may depend on who asks: the session or token, the viewer's
organisation, what it bought, the CSRF token in a form. A shared HTTP cache in front of the market (a CDN, a
company proxy) keyed on the address and ``Accept`` alone could otherwise store one viewer's answer and hand it
to another. Every answer is ``private`` and varies on the headers that name the viewer; API answers are also
``no-store``. Pages are not: a browser keeps a page it showed for Back and Forward, so that going back to a form
shows the form that was sent (with its idempotency key), not a new one. Static files are served by WhiteNoise
before this middleware runs, and keep their long lifetimes.
"""

from django.utils.cache import patch_cache_control, patch_vary_headers

from market.errors import API_PREFIX

#: The request headers that name the viewer.
VIEWER_HEADERS = ("Cookie", "Authorization")


class PrivateAnswersMiddleware:
    """``Cache-Control: private`` (``private, no-store`` under /api/) and ``Vary: Cookie, Authorization`` on
    every answer it sees."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path.startswith(API_PREFIX):
            patch_cache_control(response, private=True, no_store=True)
        else:
            patch_cache_control(response, private=True)
        patch_vary_headers(response, VIEWER_HEADERS)
        return response
