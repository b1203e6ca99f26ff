"""A refused form is shown again, not replaced by an error page: the page that holds the form is rendered anew with
what was typed and the refusal's sentence (issue 43 item 3). One mechanism for every page form:

- a form sent (POST) to an action address is refused by a domain error: the page it was sent from (the request's
  own address where the page posts to itself, else the Referer of this site) is rendered as a GET, with the
  refusal, under the refusal's status;
- a page read with a query (a GET form such as the catalog's filters) is refused: the page is rendered without
  the query, with the refusal.

The page carries the refusal (frontend/base.html): its sentence above the content, and the form's values and the
field it is about for form_refusal.js, which puts the values back into the form and the sentence beside the field.
What a form holds that must not be echoed (passwords, tokens, the CSRF token, the one-time key) is left out.
Authorisation refusals (403, 404) stay error pages: there is nothing on the form to correct.
"""

import copy
import dataclasses
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.http import Http404, QueryDict
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme

from market.errors import DomainError

#: Statuses a form is shown again for: the person can correct what was sent.
CORRECTABLE_STATUSES = frozenset({400, 409, 413, 415, 422})
#: Names of fields never sent back to the browser.
_SECRET_NAME_PARTS = ("password", "secret", "token", "csrf", "idempotency_key")


@dataclass(frozen=True)
class FormRefusal:
    """What a refused form said: ``action`` is the address it was sent to (path), ``method`` "get" or "post",
    ``values`` what was typed (name → list of values), ``field`` the field the sentence is about, if any."""

    action: str
    method: str
    message: str
    field: str = ""
    values: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def for_script(self) -> dict:
        return {
            "action": self.action,
            "method": self.method,
            "message": self.message,
            "field": self.field,
            "values": self.values,
        }


def _kept_values(query_dict) -> dict[str, list[str]]:
    return {
        name: query_dict.getlist(name)
        for name in query_dict
        if not any(part in name.lower() for part in _SECRET_NAME_PARTS)
    }


def _form_page_address(request) -> tuple[str, QueryDict]:
    """Where the refused form was shown (path and query): this address without its query for a GET form, else
    the sending page (a Referer of this site), else this address (a page that posts to itself)."""
    if request.method == "GET":
        return request.path, QueryDict()
    referer = request.headers.get("Referer", "")
    if not referer or not url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return request.path, QueryDict()
    address = urlsplit(referer)
    return address.path or request.path, QueryDict(address.query)


def refused_form_page(request, error: DomainError):
    """The page holding the refused form, rendered again with the refusal; ``None`` where there is none to show
    (an authorisation refusal, a GET without a query, an address that is not a page, a page that fails too)."""
    if error.status_code not in CORRECTABLE_STATUSES or getattr(request, "form_refusal", None):
        return None
    if request.method == "GET" and not request.GET:
        return None
    page_path, page_query = _form_page_address(request)
    try:
        match = resolve(page_path)
    except Resolver404:
        return None
    page_request = copy.copy(request)
    page_request.method = "GET"
    page_request.GET = page_query
    if hasattr(page_request, "page_form_key"):
        del page_request.page_form_key  # the page shown again carries a new one-time key
    page_request.form_refusal = FormRefusal(
        action=request.path,
        method=request.method.lower(),
        message=str(error),
        field=getattr(error, "field", None) or "",
        values=_kept_values(request.POST if request.method == "POST" else request.GET),
    )
    try:
        response = match.func(page_request, *match.args, **match.kwargs)
    except Http404:
        return None
    if response.status_code != 200 or not response.get("Content-Type", "").startswith("text/html"):
        return None  # the sending page is not one that can be shown again (a redirect, an error of its own)
    response.status_code = error.status_code
    return response


def form_refused(request, error: Exception) -> int:
    """For a view that renders its own form again (it keeps state the sending page cannot rebuild): the page
    carries the refusal like any other (the sentence beside the field); returns the status to answer with."""
    request.form_refusal = FormRefusal(
        action=request.path,
        method=request.method.lower(),
        message=str(error),
        field=getattr(error, "field", None) or "",
        values=_kept_values(request.POST if request.method == "POST" else request.GET),
    )
    return getattr(error, "status_code", 400)
