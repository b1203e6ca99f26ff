"""What every page view shares: a signed-in user, and domain errors shown as friendly pages."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import render

from frontend.form_refusals import refused_form_page
from market.errors import domain_error_from


def signed_in_required(view):
    """Like ``login_required``; but when a polling htmx request finds the session ended, the whole page goes
    to sign-in (htmx would otherwise swap the sign-in page into the status badge)."""
    page_view = login_required(view)

    @wraps(view)
    def signed_in_view(request, *args, **kwargs):
        if request.headers.get("HX-Request") and not request.user.is_authenticated:
            response = HttpResponse(status=401)
            response["HX-Redirect"] = redirect_to_login(
                request.headers.get("HX-Current-URL", "/")
            ).url
            return response
        return page_view(request, *args, **kwargs)

    return signed_in_view


def renders_domain_errors(view):
    """A domain error from a service or selector shows the refused form again with the API's sentence
    (frontend.form_refusals), or where there is no form to correct, an error page with that sentence and status."""

    @wraps(view)
    def view_with_error_page(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Exception as error:
            domain_error = domain_error_from(error)
            if domain_error is None:
                raise
            form_page = refused_form_page(request, domain_error)
            if form_page is not None:
                return form_page
            return render(
                request,
                "frontend/error.html",
                {"message": str(domain_error), "status_code": domain_error.status_code},
                status=domain_error.status_code,
            )

    return view_with_error_page


def page(view):
    return signed_in_required(renders_domain_errors(view))
