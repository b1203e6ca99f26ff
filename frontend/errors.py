"""Domain errors on pages: the same sentence the API would answer, on a friendly page with the same status."""

from functools import wraps

from django.shortcuts import render

from market.errors import domain_error_from


def renders_domain_errors(view):
    """Turn a domain error raised by a service or selector into an error page; anything else propagates."""
    @wraps(view)
    def view_with_error_page(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Exception as error:
            domain_error = domain_error_from(error)
            if domain_error is None:
                raise
            return render(request, "frontend/error.html", {"message": str(domain_error),
                                                           "status_code": domain_error.status_code},
                          status=domain_error.status_code)
    return view_with_error_page
