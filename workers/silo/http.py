"""HTTP plumbing of the toolkit's client: market addresses, the market's error sentences, retries with
backoff, multipart bodies that report upload progress, and polling.

Connection failures and 5xx answers are retried with exponential backoff; 4xx answers never are
(the request itself is wrong, and repeating it changes nothing). Only ``requests`` and the standard
library are used.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from workers.silo.errors import MarketUnreachable, OnefoldError, TimedOut, error_for_status

DEFAULT_TIMEOUT_SECONDS = 60.0
RETRY_STATUSES = range(500, 600)
Progress = Callable[[int, int], None]


def normalise_market_url(url: str) -> str:
    """``http(s)://host[:port]/prefix/`` with exactly one trailing slash; refuses anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OnefoldError(f"{url!r} is not a market address; give one like https://market.example.org/.")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/"


def server_message(response: requests.Response) -> str:
    """The market's sentence from an error response: ``detail``, else the per-field lists, else the status."""
    try:
        payload = response.json()
    except ValueError:
        return f"The market answered HTTP {response.status_code} {response.reason or ''}".rstrip() + "."
    if isinstance(payload, dict):
        if isinstance(payload.get("detail"), str):
            return payload["detail"]
        parts = []
        for field, problems in payload.items():
            text = " ".join(problems) if isinstance(problems, list) and all(isinstance(p, str) for p in problems) \
                else json.dumps(problems)
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
        Further attempts after a connection error or a 5xx answer.
    backoff_seconds : float
        Wait before the first retry; doubled each time.
    timeout_seconds : float
        Per request (connect and read).
    """

    def __init__(self, market_url: str, token: str | None = None, *, retries: int = 3, backoff_seconds: float = 0.5,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, session: requests.Session | None = None):
        self.market_url = normalise_market_url(market_url)
        self.token = token
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self.timeout_seconds = timeout_seconds
        self.session = session or requests.Session()

    def url(self, path: str) -> str:
        """Absolute URL of an API path (``"federations/"``) or of an absolute path the market returned."""
        if path.startswith(("http://", "https://")):
            return path
        return urljoin(self.market_url, path if path.startswith("/") else f"api/{path}")

    def request(self, method: str, path: str, *, json_body: Any = None, data: Any = None, headers: dict | None = None,
                params: dict | None = None, body_factory: Callable[[], Any] | None = None) -> requests.Response:
        """Send one request with retries; raise the matching :class:`~workers.silo.errors.ApiError` on 4xx/5xx.

        ``body_factory`` makes a fresh body for every attempt (a file-like body is consumed by sending it).
        """
        all_headers = {"Accept": "application/json", **(headers or {})}
        if self.token:
            all_headers["Authorization"] = f"Token {self.token}"
        attempt = 0
        while True:
            try:
                response = self.session.request(method, self.url(path), json=json_body,
                                                data=body_factory() if body_factory else data,
                                                headers=all_headers, params=params, timeout=self.timeout_seconds)
            except (requests.ConnectionError, requests.Timeout) as error:
                if attempt >= self.retries:
                    raise MarketUnreachable(f"Could not reach the market at {self.market_url} after "
                                            f"{attempt + 1} attempt(s) ({type(error).__name__}); check the address "
                                            "and that the market is running.") from error
            else:
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    break
            time.sleep(self.backoff_seconds * 2**attempt)
            attempt += 1
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _error(self, response: requests.Response) -> OnefoldError:
        message = server_message(response)
        if response.status_code == 401 and self.token:
            message = (f"The market at {self.market_url} refused the stored token ({message}). It may belong to "
                       "another market or have been revoked; run `python -m workers.silo login` again.")
        elif response.status_code == 401:
            message = f"{message} Log in first: `python -m workers.silo login`."
        try:
            payload = response.json()
        except ValueError:
            payload = None
        return error_for_status(response.status_code, message, payload)

    def get(self, path: str, **params) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: Any = None, *, headers: dict | None = None) -> Any:
        response = self.request("POST", path, json_body=body if body is not None else {}, headers=headers)
        return response.json() if response.content else None

    def download(self, path: str) -> bytes:
        """Raw bytes of a file endpoint (or of a signed URL the market returned)."""
        return self.request("GET", path, headers={"Accept": "*/*"}).content


def encode_multipart(fields: dict[str, str], files: list[tuple[str, ModelUpload]]) -> tuple[bytes, str]:
    """A multipart/form-data body and its content type (built here so that the upload can report progress)."""
    boundary = f"onefold-{uuid.uuid4().hex}"
    lines = io.BytesIO()
    for name, value in fields.items():
        lines.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        lines.write(str(value).encode() + b"\r\n")
    for name, upload in files:
        filename = upload.name.replace('"', "").replace("\r", "").replace("\n", "")
        lines.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                    "Content-Type: application/octet-stream\r\n\r\n".encode())
        lines.write(upload.data + b"\r\n")
    lines.write(f"--{boundary}--\r\n".encode())
    return lines.getvalue(), f"multipart/form-data; boundary={boundary}"


def wait_for(fetch: Callable[[], dict], *, done: Callable[[dict], bool], timeout_seconds: float,
             interval_seconds: float, what: str, on_poll: Callable[[dict], None] | None = None) -> dict:
    """Call ``fetch`` until ``done`` holds; :class:`TimedOut` after ``timeout_seconds``."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = fetch()
        if on_poll is not None:
            on_poll(value)
        if done(value):
            return value
        if time.monotonic() >= deadline:
            raise TimedOut(f"Gave up waiting for {what} after {timeout_seconds:g} s; it is still "
                           f"{value.get('status', 'running')}. Check again later.")
        time.sleep(interval_seconds)


__all__ = ["MarketSession", "ModelUpload", "ProgressReader", "encode_multipart", "normalise_market_url",
           "server_message", "wait_for"]
