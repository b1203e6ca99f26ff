"""A typed Python client for the Onefold REST API, for silos, buyers and operators who automate.

Every method maps to one endpoint and returns the decoded JSON (or bytes for downloads). Errors
become :mod:`workers.silo.errors` exceptions that carry the market's own sentence and status.
Connection failures and 5xx answers are retried with exponential backoff; 4xx answers never
are (the request itself is wrong, and repeating it changes nothing). A purchase carries an
``Idempotency-Key``, so retrying it cannot buy twice.

Only ``requests`` and the standard library are used: the toolkit installs on a silo's machine
without the market's server dependencies.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from workers.silo.errors import (AuthenticationFailed, MarketUnreachable, OnefoldError, Rejected, TimedOut,
                                 error_for_status)

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


class OnefoldClient:
    """The REST API of one market.

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

    # --- plumbing -------------------------------------------------------------------------------

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

    # --- accounts -------------------------------------------------------------------------------

    def obtain_token(self, *, username: str, password: str, name: str = "onefold silo toolkit") -> str:
        """Exchange a username and password for a new named API token; a wrong pair raises
        :class:`AuthenticationFailed`."""
        saved, self.token = self.token, None
        try:
            response = self.request("POST", "auth/token/", data={"username": username, "password": password,
                                                                  "name": name})
        except OnefoldError as error:
            if getattr(error, "status", None) == 400:  # DRF answers bad credentials with a 400
                raise AuthenticationFailed(f"The market at {self.market_url} refused the username and password "
                                           f"({error.message}); check them and try again.", status=400) from error
            raise
        finally:
            self.token = saved
        return response.json()["token"]

    def me(self) -> dict:
        """``{"username", "is_operator", "organisation": {"id", "name", "is_silo", "is_buyer"} | None}``."""
        return self.get("me/")

    # --- federations ----------------------------------------------------------------------------

    def federations(self) -> list[dict]:
        return self.get("federations/")

    def federation(self, slug: str) -> dict:
        return self.get(f"federations/{slug}/")

    def federation_create(self, **fields) -> dict:
        """Operators: create a federation (name, description, class_labels, label_column, privacy levels, ...)."""
        return self.post("federations/", fields)

    def federation_join(self, slug: str) -> dict:
        return self.post(f"federations/{slug}/join/")

    def public_dataset(self, slug: str) -> dict:
        return self.get(f"federations/{slug}/public-dataset/")

    def public_features(self, slug: str) -> bytes:
        """The encoded public features: NPZ bytes with one float32 array ``features``."""
        return self.download(f"federations/{slug}/public-dataset/features.npz")

    def feature_spec(self, slug: str) -> dict:
        return json.loads(self.download(f"federations/{slug}/public-dataset/feature-spec.json"))

    def public_dataset_upload(self, slug: str, data: bytes, *, name: str = "public.csv") -> dict:
        """Operators: upload a public dataset version (CSV, Parquet or NPZ bytes)."""
        return self._upload_file(f"federations/{slug}/public-dataset/", data, name)

    def evaluation_split_upload(self, slug: str, data: bytes, *, name: str = "evaluation.csv") -> dict:
        """Operators: upload a labelled evaluation split."""
        return self._upload_file(f"federations/{slug}/evaluation-split/", data, name)

    def evaluation_split(self, slug: str) -> dict:
        return self.get(f"federations/{slug}/evaluation-split/")

    def _upload_file(self, path: str, data: bytes, name: str) -> dict:
        body, content_type = encode_multipart({}, [("file", ModelUpload(name, data))])
        return self.request("POST", path, data=body, headers={"Content-Type": content_type}).json()

    # --- submissions ----------------------------------------------------------------------------

    def submission_create(self, *, federation: str, files: Iterable[ModelUpload], metadata: dict,
                          progress: Progress | None = None) -> dict:
        """Upload model files with their declared metadata; returns the pending submission.

        ``metadata`` holds model_family, n_local_examples, local_validation_score, privacy_level and
        optionally label_distribution, privacy_parameters, declared_epsilon.
        """
        fields = {"federation": federation}
        for name, value in metadata.items():
            if value is None:
                continue
            fields[name] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        body, content_type = encode_multipart(fields, [("files", upload) for upload in files])
        response = self.request("POST", "submissions/", headers={"Content-Type": content_type},
                                body_factory=lambda: ProgressReader(body, progress))
        return response.json()

    def submission(self, submission_id: int) -> dict:
        return self.get(f"submissions/{submission_id}/")

    def submissions(self, *, federation: str | None = None, limit: int = 500) -> list[dict]:
        return self.get("submissions/", federation=federation, limit=limit)["results"]

    def submission_wait(self, submission_id: int, *, timeout_seconds: float = 600, interval_seconds: float = 1.0,
                        on_poll: Callable[[dict], None] | None = None) -> dict:
        """Poll until the submission is ``valid``; a rejection raises :class:`Rejected` with the server's reason."""
        submission = wait_for(lambda: self.submission(submission_id),
                              done=lambda s: s["status"] in ("valid", "rejected"), timeout_seconds=timeout_seconds,
                              interval_seconds=interval_seconds, on_poll=on_poll,
                              what=f"the validation of submission #{submission_id}")
        if submission["status"] == "rejected":
            raise Rejected(f"Submission #{submission_id} was rejected: {submission['rejection_reason']}",
                           payload=submission)
        return submission

    # --- jobs -----------------------------------------------------------------------------------

    def job_create(self, federation: str, *, kind: str, privacy_level: str, parameters: dict | None = None,
                   submissions: list[int] | str = "all", seed: int | None = None) -> dict:
        body = {"kind": kind, "privacy_level": privacy_level, "parameters": parameters or {},
                "submissions": submissions}
        if seed is not None:
            body["seed"] = seed
        return self.post(f"federations/{federation}/jobs/", body)

    def job(self, job_id: int) -> dict:
        return self.get(f"jobs/{job_id}/")

    def jobs(self, *, federation: str | None = None) -> list[dict]:
        answer = self.get("jobs/", federation=federation)
        return answer["results"] if isinstance(answer, dict) and "results" in answer else answer

    def job_cancel(self, job_id: int) -> dict:
        return self.post(f"jobs/{job_id}/cancel/")

    def job_wait(self, job_id: int, *, timeout_seconds: float = 1800, interval_seconds: float = 2.0,
                 on_poll: Callable[[dict], None] | None = None) -> dict:
        """Poll until the job succeeded; failure or cancellation raises :class:`Rejected` with the reason."""
        job = wait_for(lambda: self.job(job_id), done=lambda j: j["status"] in ("succeeded", "failed", "cancelled"),
                       timeout_seconds=timeout_seconds, interval_seconds=interval_seconds, on_poll=on_poll,
                       what=f"job #{job_id}")
        if job["status"] != "succeeded":
            raise Rejected(f"Job #{job_id} {job['status']}: {job.get('failure_reason') or 'no reason given'}",
                           payload=job)
        return job

    def global_model(self, global_model_id: int) -> dict:
        return self.get(f"global-models/{global_model_id}/")

    # --- commerce -------------------------------------------------------------------------------

    def listings(self, **filters) -> dict:
        """The catalog: ``{"count", "next", "previous", "results": [...]}``; filters: search, federation,
        model_family, privacy_level, min_price, max_price, min_accuracy, ordering, limit, offset."""
        return self.get("listings/", **filters)

    def listing(self, listing_id: int) -> dict:
        """A listing's model card."""
        return self.get(f"listings/{listing_id}/")

    def listing_create(self, **fields) -> dict:
        """Operators: a draft listing for a global model (global_model, name, description, licence_text,
        price_cents)."""
        return self.post("listings/", fields)

    def listing_publish(self, listing_id: int) -> dict:
        return self.post(f"listings/{listing_id}/publish/")

    def purchase(self, listing_id: int, *, idempotency_key: str | None = None) -> dict:
        """Buy a listing. The same ``idempotency_key`` never buys twice (a fresh UUID when omitted)."""
        key = idempotency_key or str(uuid.uuid4())
        return self.post(f"listings/{listing_id}/purchase/", headers={"Idempotency-Key": key})

    def purchases(self) -> Any:
        return self.get("purchases/")

    def wallet(self) -> dict:
        return self.get("wallet/")

    def wallet_top_up(self, organisation_id: int, *, amount_cents: int, reference: str, note: str = "") -> dict:
        """Operators: credit an organisation's wallet; the same ``reference`` credits once."""
        return self.post(f"organisations/{organisation_id}/wallet/top-ups/",
                         {"amount_cents": amount_cents, "reference": reference, "note": note})

    def earnings(self) -> Any:
        return self.get("earnings/")

    def download_link(self, global_model_id: int, *, file_format: str) -> dict:
        """``{"url", "expires_at"}`` of a signed download link for a bought (or own) global model."""
        return self.post(f"global-models/{global_model_id}/download-links/", {"format": file_format})

    def global_model_download(self, global_model_id: int, *, file_format: str) -> tuple[bytes, dict]:
        """The file bytes and the link it came from."""
        link = self.download_link(global_model_id, file_format=file_format)
        return self.download(link["url"]), link

    def predict(self, global_model_id: int, rows: list[dict]) -> dict:
        """``{"classes", "probabilities", "class_labels"}`` for raw table rows (column → value)."""
        return self.post(f"global-models/{global_model_id}/predict/", {"rows": rows})


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


__all__ = ["ModelUpload", "OnefoldClient", "encode_multipart", "normalise_market_url", "server_message", "wait_for"]
