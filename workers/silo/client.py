"""A typed Python client for the Onefold REST API, for silos, buyers and operators who automate.

Every method maps to one endpoint and returns a frozen dataclass of :mod:`workers.silo.results` (its
``data`` holds the whole answer), the decoded JSON for answers the toolkit only passes on, or bytes. Errors
become :mod:`workers.silo.errors` exceptions that carry the market's own sentence and status;
retries and error translation live in :mod:`workers.silo.http`. A purchase, a job creation and an upload carry an
``Idempotency-Key``, so retrying them cannot buy twice, queue (and reserve privacy budget for) two jobs or store
(and charge) an upload twice.

Only ``requests`` and the standard library are used: the toolkit installs on a silo's machine
without the market's server dependencies.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from workers.silo.errors import AuthenticationFailed, OnefoldError, Rejected
from workers.silo.http import (
    MarketSession,
    ModelUpload,
    Progress,
    ProgressReader,
    encode_multipart,
    normalise_market_url,
    server_message,
    wait_for,
)
from workers.silo.results import (
    Augmentation,
    DownloadLink,
    Federation,
    GlobalModel,
    Job,
    Listing,
    ListingPage,
    Prediction,
    Profile,
    Purchase,
    Submission,
)


class OnefoldClient(MarketSession):
    """The REST API of one market; see :class:`workers.silo.http.MarketSession` for the constructor
    (``market_url``, ``token``, ``retries``, ``backoff_seconds``, ``timeout_seconds``)."""

    # --- accounts -------------------------------------------------------------------------------

    def obtain_token(
        self, *, username: str, password: str, name: str = "onefold silo toolkit"
    ) -> str:
        """Exchange a username and password for a new named API token; a wrong pair raises
        :class:`AuthenticationFailed`."""
        saved, self.token = self.token, None
        try:
            response = self.request(
                "POST",
                "auth/token/",
                data={"username": username, "password": password, "name": name},
            )
        except OnefoldError as error:
            if getattr(error, "status", None) == 400:  # DRF answers bad credentials with a 400
                raise AuthenticationFailed(
                    f"The market at {self.market_url} refused the username and password "
                    f"({error.message}); check them and try again.",
                    status=400,
                ) from error
            raise
        finally:
            self.token = saved
        return response.json()["token"]

    def me(self) -> Profile:
        """The account, whether it is an operator, and its organisation (None for an operator without one)."""
        return Profile.from_json(self.get("me/"))

    # --- federations ----------------------------------------------------------------------------

    def federations(self) -> list[Federation]:
        return [Federation.from_json(item) for item in self.get("federations/")]

    def federation(self, slug: str) -> Federation:
        return Federation.from_json(self.get(f"federations/{slug}/"))

    def federation_create(self, **fields) -> Federation:
        """Operators: create a federation (name, description, class_labels, label_column, privacy levels, ...)."""
        return Federation.from_json(self.post("federations/", fields))

    def federation_join(self, slug: str) -> Federation:
        """Join, or ask to join: ``is_member`` once a member, ``data["join_requested"]`` while an operator decides."""
        return Federation.from_json(self.post(f"federations/{slug}/join/"))

    def federation_update(self, slug: str, **fields) -> Federation:
        """Operators: change a federation's name, description or membership_policy."""
        return Federation.from_json(
            self.request("PATCH", f"federations/{slug}/", json_body=fields).json()
        )

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

    def evaluation_split_upload(
        self, slug: str, data: bytes, *, name: str = "evaluation.csv"
    ) -> dict:
        """Operators: upload a labelled evaluation split."""
        return self._upload_file(f"federations/{slug}/evaluation-split/", data, name)

    def evaluation_split(self, slug: str) -> dict:
        return self.get(f"federations/{slug}/evaluation-split/")

    def _upload_file(self, path: str, data: bytes, name: str) -> dict:
        body, content_type = encode_multipart({}, [("file", ModelUpload(name, data))])
        return self.request("POST", path, data=body, headers={"Content-Type": content_type}).json()

    # --- submissions ----------------------------------------------------------------------------

    def submission_create(
        self,
        *,
        federation: str,
        files: Iterable[ModelUpload],
        metadata: dict,
        progress: Progress | None = None,
        idempotency_key: str | None = None,
    ) -> Submission:
        """Upload model files with their declared metadata; returns the pending submission.

        ``metadata`` holds model_family, n_local_examples, local_validation_score, privacy_level and
        optionally label_distribution, privacy_parameters, declared_epsilon. The same ``idempotency_key`` with the
        same files returns the first submission and stores nothing again (a fresh UUID when omitted, kept across
        this call's retries, which it makes safe after a lost answer).
        """
        fields = {"federation": federation}
        for name, value in metadata.items():
            if value is None:
                continue
            fields[name] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        body, content_type = encode_multipart(fields, [("files", upload) for upload in files])
        response = self.request(
            "POST",
            "submissions/",
            headers={
                "Content-Type": content_type,
                "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
            },
            body_factory=lambda: ProgressReader(body, progress),
        )
        return Submission.from_json(response.json())

    def submission(self, submission_id: int) -> Submission:
        return Submission.from_json(self.get(f"submissions/{submission_id}/"))

    def submissions(self, *, federation: str | None = None, limit: int = 500) -> list[Submission]:
        return [
            Submission.from_json(item)
            for item in self.get("submissions/", federation=federation, limit=limit)["results"]
        ]

    def submission_wait(
        self,
        submission_id: int,
        *,
        timeout_seconds: float = 600,
        interval_seconds: float = 1.0,
        on_poll: Callable[[Submission], None] | None = None,
        backoff: float = 1.0,
    ) -> Submission:
        """Poll until the submission is ``valid``; a rejection raises :class:`Rejected` with the server's reason.
        ``backoff`` multiplies the wait between polls after each (:func:`~workers.silo.http.wait_for`)."""
        submission = wait_for(
            lambda: self.submission(submission_id),
            done=lambda found: found.status in ("valid", "rejected"),
            timeout_seconds=timeout_seconds,
            interval_seconds=interval_seconds,
            backoff=backoff,
            on_poll=on_poll,
            what=f"the validation of submission #{submission_id}",
        )
        if submission.status == "rejected":
            raise Rejected(
                f"Submission #{submission_id} was rejected: {submission.rejection_reason}",
                payload=submission.data,
            )
        return submission

    # --- jobs -----------------------------------------------------------------------------------

    def job_create(
        self,
        federation: str,
        *,
        kind: str,
        privacy_level: str,
        parameters: dict | None = None,
        submissions: list[int] | str = "all",
        seed: int | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """Launch a job. The same ``idempotency_key`` with the same request never makes a second job (a fresh
        UUID when omitted, kept across this call's retries)."""
        body = {
            "kind": kind,
            "privacy_level": privacy_level,
            "parameters": parameters or {},
            "submissions": submissions,
        }
        if seed is not None:
            body["seed"] = seed
        return Job.from_json(
            self.post(
                f"federations/{federation}/jobs/",
                body,
                headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())},
            )
        )

    def job(self, job_id: int) -> Job:
        return Job.from_json(self.get(f"jobs/{job_id}/"))

    def jobs(self, *, federation: str | None = None) -> list[Job]:
        answer = self.get("jobs/", federation=federation)
        listed = answer["results"] if isinstance(answer, dict) and "results" in answer else answer
        return [Job.from_json(item) for item in listed]

    def job_cancel(self, job_id: int) -> Job:
        return Job.from_json(self.post(f"jobs/{job_id}/cancel/"))

    def job_wait(
        self,
        job_id: int,
        *,
        timeout_seconds: float = 1800,
        interval_seconds: float = 2.0,
        on_poll: Callable[[Job], None] | None = None,
        backoff: float = 1.0,
    ) -> Job:
        """Poll until the job succeeded; failure or cancellation raises :class:`Rejected` with the reason.
        ``backoff`` multiplies the wait between polls after each (:func:`~workers.silo.http.wait_for`)."""
        job = wait_for(
            lambda: self.job(job_id),
            done=lambda found: found.status in ("succeeded", "failed", "cancelled"),
            timeout_seconds=timeout_seconds,
            interval_seconds=interval_seconds,
            backoff=backoff,
            on_poll=on_poll,
            what=f"job #{job_id}",
        )
        if job.status != "succeeded":
            raise Rejected(
                f"Job #{job_id} {job.status}: {job.failure_reason or 'no reason given'}",
                payload=job.data,
            )
        return job

    # --- federated distillation exchanges -------------------------------------------------------

    def exchange_create(self, **fields) -> dict:
        """Operators: open an FD exchange (federation, name, rounds, round_seconds, min_silos)."""
        return self.post("exchanges/", fields)

    def exchange(self, exchange_id: int) -> dict:
        """The exchange with ``round_list`` (number, status, deadline, participants, uploaded)."""
        return self.get(f"exchanges/{exchange_id}/")

    def exchange_logits_upload(
        self, exchange_id: int, number: int, *, labels: list[int], logits: list[list[float]]
    ) -> dict:
        """Upload this silo's per-label mean logits (C × C) for round ``number``; ``labels``: the classes it holds."""
        return self.post(
            f"exchanges/{exchange_id}/rounds/{number}/logits/",
            {"labels": labels, "logits": logits},
            idempotent=False,
        )

    def exchange_download(self, exchange_id: int, number: int) -> dict:
        """This silo's global logits of an aggregated round: ``{"global_logits", "available", "labels"}``."""
        return self.get(f"exchanges/{exchange_id}/rounds/{number}/download/")

    def exchange_round_wait(
        self,
        exchange_id: int,
        number: int,
        *,
        statuses: tuple[str, ...],
        timeout_seconds: float = 3600,
        interval_seconds: float = 1.0,
    ) -> dict:
        """Poll until round ``number`` exists with one of ``statuses``; the round."""

        def round_of(exchange: dict) -> dict:
            return next(
                (item for item in exchange["round_list"] if item["number"] == number),
                {"status": "not open"},
            )

        exchange = wait_for(
            lambda: self.exchange(exchange_id),
            done=lambda e: round_of(e)["status"] in statuses,
            timeout_seconds=timeout_seconds,
            interval_seconds=interval_seconds,
            what=f"round {number} of exchange #{exchange_id}",
        )
        return round_of(exchange)

    # --- federated augmentation --------------------------------------------------------------------

    def augmentation_create(self, **fields) -> Augmentation:
        """Operators: open a federated augmentation (federation, name, n_features, epochs, batch_size, and
        noise_multiplier or target_epsilon for a DP discriminator, or generator "ctgan" for a tabular one)."""
        return Augmentation.from_json(self.post("augmentations/", fields))

    def augmentation(self, augmentation_id: int) -> Augmentation:
        return Augmentation.from_json(self.get(f"augmentations/{augmentation_id}/"))

    def augmentation_leakage(
        self, augmentation_id: int, *, target_labels: list[int], labels: list[int]
    ) -> dict:
        """The device–server leakage these seeds' labels would have: ``{"n_target", "n_redundant", "leakage"}``."""
        return self.post(
            f"augmentations/{augmentation_id}/leakage/",
            {"target_labels": target_labels, "labels": labels},
            idempotent=True,
        )

    def augmentation_seeds_upload(
        self,
        augmentation_id: int,
        *,
        target_labels: list[int],
        labels: list[int],
        features: list[list[float]],
    ) -> dict:
        """Upload this silo's seeds (once): rows in [0, 1] of its target labels and redundant labels."""
        return self.post(
            f"augmentations/{augmentation_id}/seeds/",
            {"target_labels": target_labels, "labels": labels, "features": features},
            idempotent=False,
        )

    def augmentation_start(self, augmentation_id: int) -> Augmentation:
        """Operators: start the generator's training (a DP generator's ε is reserved first)."""
        return Augmentation.from_json(
            self.post(f"augmentations/{augmentation_id}/start/", idempotent=False)
        )

    def augmentation_wait(
        self,
        augmentation_id: int,
        *,
        timeout_seconds: float = 3600,
        interval_seconds: float = 1.0,
    ) -> Augmentation:
        """Poll until the generator is published, or the augmentation failed or was cancelled."""
        return wait_for(
            lambda: self.augmentation(augmentation_id),
            done=lambda augmentation: augmentation.status in ("published", "failed", "cancelled"),
            timeout_seconds=timeout_seconds,
            interval_seconds=interval_seconds,
            what=f"augmentation #{augmentation_id}",
        )

    def augmentation_generator(self, augmentation_id: int) -> bytes:
        """The published generator: safetensors bytes (spec and any DP-SGD declaration in the metadata)."""
        return self.download(f"augmentations/{augmentation_id}/generator/")

    def global_model(self, global_model_id: int) -> GlobalModel:
        return GlobalModel.from_json(self.get(f"global-models/{global_model_id}/"))

    # --- commerce -------------------------------------------------------------------------------

    def listings(self, **filters) -> ListingPage:
        """One page of the catalog; filters: search, federation, model_family, privacy_level, min_price,
        max_price, min_accuracy, ordering, limit, offset."""
        return ListingPage.from_json(self.get("listings/", **filters))

    def listing(self, listing_id: int) -> Listing:
        """A listing with its model card."""
        return Listing.from_json(self.get(f"listings/{listing_id}/"))

    def listing_create(self, **fields) -> Listing:
        """Operators: a draft listing for a global model (global_model, name, description, licence_text,
        price_cents)."""
        return Listing.from_json(self.post("listings/", fields))

    def listing_publish(self, listing_id: int, *, override_reason: str | None = None) -> Listing:
        """Operators: publish a draft. A model that does not beat the majority-class guess by 5 points of balanced
        accuracy is refused (Conflict, with the numbers) unless ``override_reason`` says why it is sold anyway."""
        return Listing.from_json(
            self.post(
                f"listings/{listing_id}/publish/",
                {"override_reason": override_reason} if override_reason else None,
            )
        )

    def purchase(self, listing_id: int, *, idempotency_key: str | None = None) -> Purchase:
        """Buy a listing. The same ``idempotency_key`` never buys twice (a fresh UUID when omitted)."""
        key = idempotency_key or str(uuid.uuid4())
        return Purchase.from_json(
            self.post(f"listings/{listing_id}/purchase/", headers={"Idempotency-Key": key})
        )

    def purchases(self) -> Any:
        return self.get("purchases/")

    def wallet(self) -> dict:
        return self.get("wallet/")

    def wallet_top_up(
        self, organisation_id: int, *, amount_cents: int, reference: str, note: str = ""
    ) -> dict:
        """Operators: credit an organisation's wallet; the same ``reference`` credits once."""
        return self.post(
            f"organisations/{organisation_id}/wallet/top-ups/",
            {"amount_cents": amount_cents, "reference": reference, "note": note},
            idempotent=True,
        )

    def earnings(self) -> Any:
        return self.get("earnings/")

    def download_link(
        self, global_model_id: int, *, file_format: str, package: bool = False
    ) -> DownloadLink:
        """A signed download link for a bought (or own) global model; ``file_format`` ``raw_onnx`` is the model
        with the feature encoding in front, ``package`` zips the file with README.md and feature-spec.json."""
        return DownloadLink.from_json(
            self.post(
                f"global-models/{global_model_id}/download-links/",
                {"format": file_format, "package": package},
                idempotent=True,
            )
        )  # a second link changes nothing

    def global_model_download(
        self, global_model_id: int, *, file_format: str, package: bool = False
    ) -> tuple[bytes, DownloadLink]:
        """The file bytes and the link it came from, with the file name the market gave it (``link.filename``:
        the web's name for it, which the buyer's snippet opens)."""
        link = self.download_link(global_model_id, file_format=file_format, package=package)
        data, filename = self.download_named(link.url)
        return data, replace(link, filename=filename)

    def global_model_feature_spec(self, global_model_id: int) -> dict:
        """The feature specification a bought (or own) global model reads."""
        return json.loads(self.download(f"global-models/{global_model_id}/feature-spec.json"))

    def predict(self, global_model_id: int, rows: list[dict]) -> Prediction:
        """Classes and probabilities for raw table rows (column → value)."""
        return Prediction.from_json(
            self.post(f"global-models/{global_model_id}/predict/", {"rows": rows}, idempotent=True)
        )


__all__ = [
    "ModelUpload",
    "OnefoldClient",
    "encode_multipart",
    "normalise_market_url",
    "server_message",
    "wait_for",
]
