"""The OpenAPI schema, generated once per process and version and language instead of for every request.

Generating it walks every view and serializer (0.15–0.4 s of CPU once the code is imported, 2–3 s for the first
one in a process); it changes only with the code and the settings. drf-spectacular's own view builds it afresh for
each request, so each schema request cost as much as hundreds of catalog pages.

What the cached schema may depend on, and why the key is (version, language):

- the *endpoints*: with ``SERVE_PUBLIC`` (drf-spectacular's default, kept in ``SPECTACULAR_SETTINGS``) every
  endpoint is listed whoever asks, so the schema does not depend on the requesting user; views that build their
  serializer from ``request.user`` would break this and are not cached apart
  (``tests/market/test_api_schema.py`` checks that an operator and an anonymous visitor get the same schema);
- the *version* (the view's versioning, or ``?version=`` where the API has versions) and the *language*
  (``?lang=`` with ``USE_I18N``): the key. The number of kept schemas is bounded (least recently used dropped).
  The API has no versioning class, so a ``?version=`` names no version and is ignored: otherwise every new value
  was a schema generated afresh and written into ``info.version`` (issue 42: a client cycling it cost 0.15–0.4 s
  of CPU a request);
- the *format* (YAML or JSON): chosen by the renderer from the same dictionary, so it is not in the key;
- the *settings*: the cache is emptied when a test overrides a setting (``setting_changed``).
"""

import threading
from collections import OrderedDict
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response
from rest_framework.settings import api_settings

# Each schema is a few megabytes of Python objects; eight bounds what a client cycling ?version= can make us keep.
MAX_CACHED_SCHEMAS = 8

_schemas: OrderedDict[tuple[Any, ...], dict] = OrderedDict()
_schemas_lock = threading.Lock()


def cached_schemas_clear() -> None:
    with _schemas_lock:
        _schemas.clear()


@receiver(setting_changed)
def _cached_schemas_clear_on_setting_changed(**kwargs) -> None:
    cached_schemas_clear()


class CachedSpectacularAPIView(SpectacularAPIView):
    """``SpectacularAPIView`` with the same responses and headers, generating each schema once per process.

    Keyed by the view's class: a second route serving another urlconf or ``custom_settings`` needs its own
    subclass. Without ``SERVE_PUBLIC`` the schema lists what the requesting user may call, and is not cached.
    """

    def _get_schema_response(self, request):
        if not self.serve_public:
            return super()._get_schema_response(request)
        version = self.api_version or request.version or self._get_version_parameter(request)
        return Response(
            data=self._schema(request, version),
            headers={
                "Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'
            },
        )

    def _get_version_parameter(self, request):
        """``?version=`` only where the API has versions (drf-spectacular's rule then); None for this unversioned
        API, whatever a client sends."""
        if api_settings.DEFAULT_VERSIONING_CLASS is None:
            return None
        return super()._get_version_parameter(request)

    def _schema(self, request, version: str | None) -> dict:
        language = translation.get_language() if settings.USE_I18N else None
        key = (type(self), version, language)
        with _schemas_lock:
            if key in _schemas:
                _schemas.move_to_end(key)
                return _schemas[key]
        # Generated outside the lock: two first requests at once may both generate, and get equal schemas.
        generator = self.generator_class(
            urlconf=self.urlconf, api_version=version, patterns=self.patterns
        )
        schema = generator.get_schema(request=request, public=self.serve_public)
        with _schemas_lock:
            _schemas[key] = schema
            while len(_schemas) > MAX_CACHED_SCHEMAS:
                _schemas.popitem(last=False)
        return schema
