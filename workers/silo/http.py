"""HTTP plumbing of the toolkit's client: market addresses, the market's error sentences, retries with
backoff, multipart bodies that report upload progress, and polling.

Retries never do a thing twice. An idempotent request (GET, PUT, DELETE, or one carrying an
``Idempotency-Key``) is retried after a connection failure or a 5xx answer, with exponential backoff. Any
request is retried when it never reached the market (the connection was refused or timed out) and after 429
or 503 (the market did nothing and said to come back), waiting ``Retry-After`` when the market gives it.
Other 4xx answers never are (the request itself is wrong, and repeating it changes nothing). Only
``requests`` and the standard library are used.
"""

from __future__ import annotations

import email.message
import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import PurePosixPath
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from workers.silo.errors import MarketUnreachable, OnefoldError, TimedOut, error_for_status

DEFAULT_TIMEOUT_SECONDS = 60.0
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
NOTHING_DONE_STATUSES = frozenset(
    {429, 503}
)  # the market did nothing and asks to come back: any request may retry
RETRY_STATUSES = range(
    500, 600
)  # idempotent requests only: a 500, 502 or 504 may come after the work was done
MAX_RETRY_AFTER_SECONDS = 300.0
Progress = Callable[[int, int], None]
Polled = TypeVar("Polled")  # what ``wait_for`` polls: a submission, a job


def normalise_market_url(url: str) -> str:
    """``http(s)://host[:port]/prefix/`` with exactly one trailing slash; refuses anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OnefoldError(
            f"{url!r} is not a market address; give one like https://market.example.org/."
        )
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/"


def server_message(response: requests.Response) -> str:
    """The market's sentence from an error response: ``detail``, else the per-field lists, else the status."""
    try:
        payload = response.json()
    except ValueError:
        return (
            f"The market answered HTTP {response.status_code} {response.reason or ''}".rstrip()
            + "."
        )
    if isinstance(payload, dict):
        if isinstance(payload.get("detail"), str):
            return payload["detail"]
        parts = []
        for field, problems in payload.items():
            text = (
                " ".join(problems)
                if isinstance(problems, list) and all(isinstance(p, str) for p in problems)
                else json.dumps(problems)
            )
            parts.append(text if field == "non_field_errors" else f"{field}: {text}")
        if parts:
            return "; ".join(parts)
    return f"The market answered HTTP {response.status_code}: {json.dumps(payload)[:500]}"


class ProgressReader(io.BytesIO):
    """Bytes handed to ``requests`` as a file: it reports how much has been sent as it is read."""

    def __init__(self, data: bytes, progress: Progress | None):
        super().__init__(data)
        self.total = len(data)
        self.progress = progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self.progress is not None:
            self.progress(self.tell(), self.total)
        return chunk


@dataclass(frozen=True)
class ModelUpload:
    """One model file to upload: its name (shown in the market) and bytes."""

    name: str
    data: bytes


class MarketSession:
    """Requests to one market's REST API, with its token, retries and error translation.

    Parameters
    ----------
    market_url : str
        The market's address, e.g. ``http://127.0.0.1:8000/``; the API lives under ``api/``.
    token : str or None
        The API token (``login`` gets one); ``None`` for the token endpoint only.
    retries : int
        Further attempts after a failure that may be retried (the module docstring says which).
    backoff_seconds : float
        Wait before the first retry; doubled each time.
    timeout_seconds : float
        Per request (connect and read).
    max_retry_after_seconds : float
        The longest ``Retry-After`` the client waits; a market asking for longer gets the error raised.
    """

    def __init__(
        self,
        market_url: str,
        token: str | None = None,
        *,
        retries: int = 3,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        session: requests.Session | None = None,
        max_retry_after_seconds: float = MAX_RETRY_AFTER_SECONDS,
    ):
        self.market_url = normalise_market_url(market_url)
        self.token = token
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self.timeout_seconds = timeout_seconds
        self.max_retry_after_seconds = max_retry_after_seconds
        self.session = session or requests.Session()

    def url(self, path: str) -> str:
        """Absolute URL of an API path (``"federations/"``) or of an absolute path the market returned."""
        if path.startswith(("http://", "https://")):
            return path
        return urljoin(self.market_url, path if path.startswith("/") else f"api/{path}")

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: Any = None,
        headers: dict | None = None,
        params: dict | None = None,
        body_factory: Callable[[], Any] | None = None,
        idempotent: bool | None = None,
    ) -> requests.Response:
        """Send one request with retries; raise the matching :class:`~workers.silo.errors.ApiError` on 4xx/5xx.

        ``body_factory`` makes a fresh body for every attempt (a file-like body is consumed by sending it).
        ``idempotent`` says whether sending the request twice does it once; by default, for the idempotent
        methods and for a request with an ``Idempotency-Key`` header.
        """
        all_headers = {"Accept": "application/json", **(headers or {})}
        if self.token:
            all_headers["Authorization"] = f"Token {self.token}"
        if idempotent is None:
            idempotent = method.upper() in IDEMPOTENT_METHODS or "Idempotency-Key" in all_headers
        attempt = 0
        while True:
            try:
                response = self.session.request(
                    method,
                    self.url(path),
                    json=json_body,
                    data=body_factory() if body_factory else data,
                    headers=all_headers,
                    params=params,
                    timeout=self.timeout_seconds,
                )
            except (requests.ConnectionError, requests.Timeout) as error:
                may_retry = idempotent or _never_sent(error)
                if attempt >= self.retries or not may_retry:
                    raise MarketUnreachable(
                        f"Could not reach the market at {self.market_url} after "
                        f"{attempt + 1} attempt(s) ({type(error).__name__}); check the address "
                        "and that the market is running."
                        + (
                            ""
                            if may_retry
                            else (" The request may have arrived; check before sending it again.")
                        )
                    ) from error
                wait = self.backoff_seconds * 2**attempt
            else:
                wait = self._retry_wait(response, attempt=attempt, idempotent=idempotent)
                if wait is None:
                    break
            time.sleep(wait)
            attempt += 1
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _retry_wait(
        self, response: requests.Response, *, attempt: int, idempotent: bool
    ) -> float | None:
        """Seconds to wait before retrying this answer, or None to stop here."""
        retryable = response.status_code in NOTHING_DONE_STATUSES or (
            idempotent and response.status_code in RETRY_STATUSES
        )
        if not retryable or attempt >= self.retries:
            return None
        retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        if retry_after is None:
            return self.backoff_seconds * 2**attempt
        return retry_after if retry_after <= self.max_retry_after_seconds else None

    def _error(self, response: requests.Response) -> OnefoldError:
        message = server_message(response)
        if response.status_code == 401 and self.token:
            message = (
                f"The market at {self.market_url} refused the stored token ({message}). It may belong to "
                "another market or have been revoked; run `python -m workers.silo login` again."
            )
        elif response.status_code == 401:
            message = f"{message} Log in first: `python -m workers.silo login`."
        try:
            payload = response.json()
        except ValueError:
            payload = None
        return error_for_status(response.status_code, message, payload)

    def get(self, path: str, **params) -> Any:
        return self.request(
            "GET", path, params={k: v for k, v in params.items() if v is not None}
        ).json()

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        headers: dict | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        response = self.request(
            "POST",
            path,
            json_body=body if body is not None else {},
            headers=headers,
            idempotent=idempotent,
        )
        return response.json() if response.content else None

    def download(self, path: str) -> bytes:
        """Raw bytes of a file endpoint (or of a signed URL the market returned)."""
        return self.download_named(path)[0]

    def download_named(self, path: str) -> tuple[bytes, str | None]:
        """Raw bytes of a file endpoint and the file name its ``Content-Disposition`` gives (None without one), so
        that the toolkit writes the file under the name the web's download and snippets use."""
        response = self.request("GET", path, headers={"Accept": "*/*"})
        return response.content, attachment_filename(response.headers.get("Content-Disposition"))


def _never_sent(error: Exception) -> bool:
    """Whether the request failed before reaching the market (refused or timed-out connection), so that sending
    it again cannot do anything twice."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, NewConnectionError)


def attachment_filename(content_disposition: str | None) -> str | None:
    """The bare file name of a ``Content-Disposition: attachment; filename=...`` header (no folders: a name the
    market sends never writes outside the current folder), or None."""
    if not content_disposition:
        return None
    message = email.message.Message()
    message["Content-Disposition"] = content_disposition
    name = PurePosixPath(message.get_filename() or "").name
    return None if name in ("", ".", "..") else name


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (it gives seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def encode_multipart(
    fields: dict[str, str], files: list[tuple[str, ModelUpload]]
) -> tuple[bytes, str]:
    """A multipart/form-data body and its content type (built here so that the upload can report progress)."""
    boundary = f"onefold-{uuid.uuid4().hex}"
    lines = io.BytesIO()
    for name, value in fields.items():
        lines.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        )
        lines.write(str(value).encode() + b"\r\n")
    for name, upload in files:
        filename = upload.name.replace('"', "").replace("\r", "").replace("\n", "")
        lines.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
        )
        lines.write(upload.data + b"\r\n")
    lines.write(f"--{boundary}--\r\n".encode())
    return lines.getvalue(), f"multipart/form-data; boundary={boundary}"


def wait_for(
    fetch: Callable[[], Polled],
    *,
    done: Callable[[Polled], bool],
    timeout_seconds: float,
    interval_seconds: float,
    what: str,
    on_poll: Callable[[Polled], None] | None = None,
    backoff: float = 1.0,
    max_interval_seconds: float = 30.0,
) -> Polled:
    """Call ``fetch`` until ``done`` holds; :class:`TimedOut` after ``timeout_seconds``. The wait between calls
    starts at ``interval_seconds`` and is multiplied by ``backoff`` after each, up to ``max_interval_seconds``;
    it never runs past the deadline, where ``fetch`` is called a last time."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = fetch()
        if on_poll is not None:
            on_poll(value)
        if done(value):
            return value
        if time.monotonic() >= deadline:
            status = (
                value.get("status") if isinstance(value, dict) else getattr(value, "status", None)
            ) or "running"
            raise TimedOut(
                f"Gave up waiting for {what} after {timeout_seconds:g} s; it is still "
                f"{status}. Check again later."
            )
        time.sleep(min(interval_seconds, max(deadline - time.monotonic(), 0.0)))
        interval_seconds = min(interval_seconds * backoff, max_interval_seconds)


__all__ = [
    "MarketSession",
    "ModelUpload",
    "ProgressReader",
    "encode_multipart",
    "normalise_market_url",
    "retry_after_seconds",
    "server_message",
    "wait_for",
]
