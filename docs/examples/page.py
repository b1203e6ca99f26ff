"""Adding a page (docs/architecture.md, "Adding a page"): what a federation's classes are, for whoever may see it.

A page view parses the request, calls one selector (a read, which decides who may see what) or service (a write),
and renders; ``@page`` signs the user in and shows a domain error (404, 403) as the API's sentence. A real page keeps
its template in ``frontend/templates/frontend/<noun>/<page>.html`` (here inline, so that the example is one file),
adds its URL to ``frontend/urls.py``, and a journey test (tests/frontend) runs it in a browser with axe at 390 px.
A form that changes state posts a one-time key: ``{% form_key_field %}`` in the form, ``@sent_once`` on the view.
"""

from django.http import HttpResponse
from django.template import engines
from django.views.decorators.http import require_GET

from frontend.decorators import page
from market.federations.selectors import federation_get

TEMPLATE = """{% extends "frontend/base.html" %}
{% block title %}Classes of {{ federation.name }}{% endblock %}
{% block content %}
<section class="card">
  <h1>Classes of {{ federation.name }}</h1>
  <ol start="0">{% for label in federation.class_labels %}<li>{{ label }}</li>{% endfor %}</ol>
</section>
{% endblock %}"""


@require_GET
@page
def federation_classes_page(request, slug):
    federation = federation_get(
        slug=slug, user=request.user
    )  # 404 for a federation this user may not see
    body = engines["django"].from_string(TEMPLATE).render({"federation": federation}, request)
    return HttpResponse(body)
