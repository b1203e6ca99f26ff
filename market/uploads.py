"""Request bodies read in bounded pieces: stopped as soon as they pass the size limit.

The limit is checked against the declared Content-Length before anything is read and again
while the body streams in, so an oversized upload is never written out in full. Multipart uploads
go through :class:`SizeLimitedUploadHandler`; bodies a parser reads itself (a CSV sent for
predictions) through :func:`body_chunks`.
"""

from collections.abc import Iterator

from django.conf import settings
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from rest_framework.exceptions import APIException

CHUNK_BYTES = 64 * 1024


class UploadTooLarge(APIException):
    status_code = 413
    default_code = "upload_too_large"

    def __init__(self):
        limit_megabytes = settings.ONEFOLD_MAX_UPLOAD_BYTES / 1024**2
        super().__init__(
            f"The upload is larger than the {limit_megabytes:g} MB limit; send a smaller file."
        )


class SizeLimitedUploadHandler(TemporaryFileUploadHandler):
    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > settings.ONEFOLD_MAX_UPLOAD_BYTES:
            raise UploadTooLarge()
        self.received_bytes = 0

    def receive_data_chunk(self, raw_data, start):
        self.received_bytes += len(raw_data)
        if self.received_bytes > settings.ONEFOLD_MAX_UPLOAD_BYTES:
            raise UploadTooLarge()
        return super().receive_data_chunk(raw_data, start)


def body_chunks(stream) -> Iterator[bytes]:
    """The body of a request in chunks; :class:`UploadTooLarge` once it passes ``ONEFOLD_MAX_UPLOAD_BYTES``."""
    received_bytes = 0
    while chunk := stream.read(CHUNK_BYTES):
        received_bytes += len(chunk)
        if received_bytes > settings.ONEFOLD_MAX_UPLOAD_BYTES:
            raise UploadTooLarge()
        yield chunk
