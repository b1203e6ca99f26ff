"""``GET /toolkit/<wheel>``: the toolkit's wheel; ``GET /api/toolkit/``: where it is and how to install it.

Both are public: a silo installs the toolkit before it has an account or a token, and the wheel holds nothing
but the open toolkit's code.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpResponse
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from market.toolkit.wheel import toolkit_wheel


def toolkit_wheel_url(request) -> str:
    """The wheel's absolute address on this market (what ``pip install`` is given)."""
    return request.build_absolute_uri(
        reverse("toolkit-wheel", kwargs={"filename": toolkit_wheel().filename})
    )


def toolkit_wheel_download(request, filename: str) -> HttpResponse:
    wheel = toolkit_wheel()
    if filename != wheel.filename:
        raise Http404(f"This market serves the toolkit as {wheel.filename}.")
    response = HttpResponse(wheel.data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{wheel.filename}"'
    response["ETag"] = f'"{wheel.sha256}"'
    response["Digest"] = f"sha-256={wheel.sha256}"
    return response


def silo_guide(request) -> HttpResponse:
    """``docs/silo-guide.md`` as plain text: what the federation and upload pages link as "the silo guide"."""
    guide = (settings.BASE_DIR / "docs" / "silo-guide.md").read_text()
    return HttpResponse(guide, content_type="text/plain; charset=utf-8")


class ToolkitOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The distribution: onefold-toolkit.")
    version = serializers.CharField()
    filename = serializers.CharField()
    url = serializers.URLField(help_text="Give this to pip install (with [train] for training).")
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    extras = serializers.ListField(
        child=serializers.CharField(),
        help_text="train: the tree families; neural: also torch and Opacus (zoo networks, DP-SGD, fd).",
    )


class ToolkitApi(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses=ToolkitOutput)
    def get(self, request):
        """The silo toolkit's wheel on this market: ``pip install '<url>[train]'`` in a fresh virtualenv."""
        wheel = toolkit_wheel()
        return Response(
            ToolkitOutput(
                {
                    "name": wheel.name,
                    "version": wheel.version,
                    "filename": wheel.filename,
                    "url": toolkit_wheel_url(request),
                    "sha256": wheel.sha256,
                    "size_bytes": len(wheel.data),
                    "extras": list(wheel.extras),
                }
            ).data
        )
