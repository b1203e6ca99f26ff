"""Page forms that are safe to send twice. Each state-changing form carries a one-time key, rendered as a hidden
field when its page is rendered (``{% form_key_field %}``); the view, wrapped in :func:`sent_once`, claims the key
for its address before it acts. A second send of the same key to the same address — the browser's Back and the
button again, a double click, a reload that resends the form — acts no second time: it is redirected to where the
first send's answer went.

A page's key is also kept in its entry of the browser's history (form_key.js), so a page the browser fetches anew
on Back or Reload, instead of showing its copy, sends the same key again; a link to the page gives a new one.

The claim commits before the view acts, so two sends that arrive together act once (the second finds the
first's claim). A refusal the user can correct (an answer of 4xx, a domain error) releases the key; an
unexpected failure keeps it, since what the view did before failing is not known."""

import re
import uuid
from functools import wraps

from django.contrib import messages
from django.db import IntegrityError, transaction
from django.shortcuts import redirect, render

from frontend.models import FormSubmission
from market.errors import domain_error_from

FORM_KEY_FIELD = "idempotency_key"
#: What a key may hold: those this market renders, and any other a script may choose, of safe characters.
_FORM_KEY = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def page_form_key(request) -> str:
    """The key of the page being rendered: a new one for each rendering, shared by the page's forms."""
    if request is None:
        return f"form-{uuid.uuid4()}"
    if not hasattr(request, "page_form_key"):
        request.page_form_key = f"form-{uuid.uuid4()}"
    return request.page_form_key


def sent_once(view):
    """Wrap a page view that changes state (inside :func:`frontend.decorators.page`, so the user is signed in);
    a POST without a key acts as before."""

    @wraps(view)
    def view_sent_once(request, *args, **kwargs):
        key = request.POST.get(FORM_KEY_FIELD, "") if request.method == "POST" else ""
        if not key:
            return view(request, *args, **kwargs)
        if not _FORM_KEY.fullmatch(key):
            return _sent_page(
                request, "This form's key is not one this market rendered; reload the page.", 400
            )
        path = request.path[: FormSubmission._meta.get_field("path").max_length]
        try:
            with transaction.atomic():
                claim = FormSubmission.objects.create(user=request.user, key=key, path=path)
        except IntegrityError:
            return _replay(
                request, FormSubmission.objects.get(user=request.user, key=key, path=path)
            )
        try:
            response = view(request, *args, **kwargs)
        except Exception as error:
            if domain_error_from(error) is not None:
                claim.delete()  # refused: the service rolled back, nothing was done
            raise
        if 400 <= response.status_code < 500:
            claim.delete()  # the form is shown again with what to correct; nothing was done
            return response
        claim.status_code = response.status_code
        claim.result_url = response.get("Location", "") if 300 <= response.status_code < 400 else ""
        claim.save(update_fields=["status_code", "result_url"])
        return response

    view_sent_once.claims_form_key = True  # kept by the decorators around it (functools.wraps)
    return view_sent_once


def _replay(request, earlier: FormSubmission):
    if earlier.status_code is None:
        return _sent_page(
            request,
            "This form was already sent and is still being processed; reload its page in a moment "
            "to see the result. It was not sent again.",
            409,
        )
    if earlier.result_url:
        messages.info(
            request, "This form was already sent; here is its result. Nothing was done again."
        )
        return redirect(earlier.result_url)
    return _sent_page(request, "This form was already sent; nothing was done again.", 409)


def _sent_page(request, message: str, status: int):
    return render(
        request, "frontend/error.html", {"message": message, "status_code": status}, status=status
    )
