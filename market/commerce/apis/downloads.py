"""The API of downloads: a signed, short-lived link to one file of a bought model, and the file it resolves to."""

import hashlib
import io

from django.core.files.storage import default_storage
from django.http import FileResponse, HttpResponseRedirect
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from market.commerce.delivery import (
    download_delivered,
    download_filename,
    download_link_create,
    download_resolve,
    presigned_download_url,
)
from market.commerce.packages import download_content


class DownloadLinkInput(serializers.Serializer):
    format = serializers.CharField(
        max_length=40,
        help_text="onnx, skops, xgboost-json, safetensors, kernel_npz, "
        "bundle, or raw_onnx (the ONNX with the feature encoding in front, built on download).",
    )
    package = serializers.BooleanField(
        default=False,
        help_text="Zip the file with the model card README.md and the feature specification.",
    )


class DownloadLinkApi(APIView):
    @extend_schema(request=DownloadLinkInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, global_model_id):
        """A short-lived signed link to one file of a model your organisation bought."""
        given = DownloadLinkInput(data=request.data)
        given.is_valid(raise_exception=True)
        link = download_link_create(
            user=request.user,
            global_model_id=global_model_id,
            file_format=given.validated_data["format"],
            package=given.validated_data["package"],
            request=request,
        )
        url = request.build_absolute_uri(reverse("api-download", args=[link.token]))
        return Response({"url": url, "expires_at": link.expires_at}, status=status.HTTP_201_CREATED)


class DownloadApi(APIView):
    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            302: OpenApiResponse(
                description="With object storage: the file's presigned, expiring URL in Location "
                "(its SHA-256 in X-Content-SHA256)."
            ),
        }
    )
    def get(self, request, token):
        """The file of a signed link, for the signed-in user it was made for (session or API token)."""
        resolved = download_resolve(token=token, user=request.user, request=request)
        presigned_url = presigned_download_url(resolved)
        if presigned_url:  # the store serves the stored bytes
            filename = download_filename(resolved.model_file)
            response = HttpResponseRedirect(presigned_url)
            response["X-Content-SHA256"] = resolved.model_file.sha256
        elif resolved.variant == "file" and not resolved.package:  # the stored bytes, streamed
            model_file = resolved.model_file
            filename = download_filename(model_file)
            response = FileResponse(
                default_storage.open(model_file.stored_name, "rb"),
                as_attachment=True,
                filename=filename,
                content_type="application/octet-stream",
            )
            response["X-Content-SHA256"] = model_file.sha256
        else:
            filename, data = download_content(resolved)
            response = FileResponse(
                io.BytesIO(data),
                as_attachment=True,
                filename=filename,
                content_type="application/zip" if resolved.package else "application/octet-stream",
            )
            response["X-Content-SHA256"] = hashlib.sha256(data).hexdigest()
        download_delivered(
            resolved=resolved,
            user=request.user,
            filename=filename,
            sha256=response["X-Content-SHA256"],
            request=request,
        )
        response["Cache-Control"] = "no-store"
        return response
