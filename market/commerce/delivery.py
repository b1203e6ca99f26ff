"""Delivering what was bought: short-lived signed download links, and predictions through the platform.

A download link is a ``TimestampSigner`` token naming the file and the user it was made for. It is no bearer
token: it serves only that user, signed in (session or API token), and only while their organisation still holds
the entitlement; every use, and every refused one, is audited with who tried. Files are never served from a
public media URL.
Predictions run the model's ONNX file (or an ensemble bundle's members) in warm sandboxed sessions
(``market.sandbox.warm_models_predict``).
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings
from django.core import signing
from django.core.files.storage import default_storage
from django.utils import timezone

from market.accounts.models import User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.commerce.selectors import global_model_require_access, predictions_entitlement
from market.errors import DomainError, InvalidInput, PermissionDenied
from market.feature_views import global_model_feature_view
from market.jobs.models import GlobalModel, GlobalModelFile
from market.sandbox import warm_models_predict
from market.storage import artifact_read
from workers.algorithms.bundle import MembersFailed, stored_ensemble_probabilities
from workers.modelio.base import FILE_EXTENSIONS, ArtifactFormat, artifact_format_named
from workers.modelio.bundle import bundle_read

DOWNLOAD_SALT = "onefold.commerce.download"
#: Not a stored file: the ONNX file (or an ensemble's ONNX members) with the feature encoding in front, built on
#: download (market.commerce.packages).
RAW_ONNX = "raw_onnx"


class ModelUnavailable(DomainError):
    status_code = 503


@dataclass(frozen=True)
class ResolvedDownload:
    """What a valid link delivers: a stored file, or (``variant`` raw_onnx) the raw-column model built from it;
    bare, or (``package``) zipped with the model card README.md and the feature specification."""

    model_file: GlobalModelFile
    variant: str = "file"
    package: bool = False
    expires_at: datetime | None = None  # when the link stops working


def presigned_download_url(resolved: ResolvedDownload) -> str | None:
    """With object storage and ONEFOLD_PRESIGNED_DOWNLOADS, an expiring URL of the store that serves the stored
    file itself (never a file built on download, nor a package), valid no longer than the link it was made for;
    otherwise None, and the web process streams the file. Call it only after :func:`download_resolve`, which checked
    the entitlement and audited the delivery."""
    if not settings.ONEFOLD_PRESIGNED_DOWNLOADS or resolved.variant != "file" or resolved.package:
        return None
    seconds = settings.ONEFOLD_PRESIGNED_SECONDS
    if resolved.expires_at is not None:
        seconds = min(seconds, int((resolved.expires_at - timezone.now()).total_seconds()))
    filename = download_filename(resolved.model_file)
    return default_storage.url(
        resolved.model_file.stored_name,
        expire=max(seconds, 1),
        parameters={
            "ResponseContentDisposition": f'attachment; filename="{filename}"',
            "ResponseContentType": "application/octet-stream",
        },
    )


@dataclass(frozen=True)
class DownloadLink:
    token: str
    expires_at: datetime


def download_filename(model_file: GlobalModelFile) -> str:
    return f"onefold-global-model-{model_file.global_model_id}.{FILE_EXTENSIONS.get(model_file.format, 'bin')}"


def _file_for(global_model: GlobalModel, file_format: str) -> GlobalModelFile:
    formats = (
        [file_format] if file_format != RAW_ONNX else [ArtifactFormat.ONNX, ArtifactFormat.BUNDLE]
    )
    model_file = (
        global_model.files.filter(format__in=formats).order_by("format").last()
    )  # onnx before bundle
    if model_file is None:
        available = ", ".join([*global_model.files.values_list("format", flat=True), RAW_ONNX])
        raise InvalidInput(
            f"Global model #{global_model.id} has no {file_format!r} file; choose one of {available}."
        )
    return model_file


def download_link_create(
    *, user: User, global_model_id: int, file_format: str, package: bool = False, request=None
) -> DownloadLink:
    """A link to one file of a model the user's organisation bought (operators: any), valid for the TTL;
    ``raw_onnx`` names the raw-column model; ``package`` zips it with the model card and feature specification."""
    global_model = global_model_require_access(user=user, global_model_id=global_model_id)
    _require_download_access(user=user, global_model=global_model)
    file_format = artifact_format_named(file_format)
    model_file = _file_for(global_model, file_format)
    expires_at = timezone.now() + timedelta(seconds=settings.ONEFOLD_DOWNLOAD_LINK_TTL_SECONDS)
    token = signing.TimestampSigner(salt=DOWNLOAD_SALT).sign_object(
        {
            "file": model_file.id,
            "user": user.id,
            "variant": RAW_ONNX if file_format == RAW_ONNX else "file",
            "package": bool(package),
            "expires": int(expires_at.timestamp()),
        }
    )
    audit_record(
        action="model.download_link_created",
        actor=user,
        target=global_model,
        request=request,
        details={"format": file_format, "package": bool(package)},
    )
    return DownloadLink(token=token, expires_at=expires_at)


def _require_download_access(*, user: User, global_model: GlobalModel) -> None:
    """A predictions-only purchase never downloads the model (operators may)."""
    if user.is_operator:
        return
    if predictions_entitlement(user=user, global_model_id=global_model.id) is not None:
        raise PermissionDenied(
            f"Your organisation bought predictions only for global model #{global_model.id}: it cannot be "
            "downloaded. Call POST /api/global-models/"
            f"{global_model.id}/predict/ with the token your purchase gave."
        )


def _linked_file(*, token: str, user: User) -> ResolvedDownload:
    try:
        payload = signing.TimestampSigner(salt=DOWNLOAD_SALT).unsign_object(
            token, max_age=settings.ONEFOLD_DOWNLOAD_LINK_TTL_SECONDS
        )
    except signing.SignatureExpired:
        raise PermissionDenied(
            "This download link has expired; ask for a new one from your purchases."
        ) from None
    except signing.BadSignature:
        raise PermissionDenied(
            "This download link is not valid; ask for a new one from your purchases."
        ) from None
    if payload.get("user") != user.id:
        raise PermissionDenied(
            "This download link was made for another account; sign in as its buyer, or ask for "
            "a link of your own from your purchases."
        )
    model_file = (
        GlobalModelFile.objects.filter(pk=payload.get("file"))
        .select_related("global_model")
        .first()
    )
    if model_file is None:
        raise PermissionDenied(
            "This download link is no longer valid; ask for a new one from your purchases."
        )
    global_model = global_model_require_access(
        user=user, global_model_id=model_file.global_model_id
    )  # entitled now, not then
    _require_download_access(user=user, global_model=global_model)
    return ResolvedDownload(
        model_file=model_file,
        variant=payload.get("variant", "file"),
        package=bool(payload.get("package")),
        expires_at=datetime.fromtimestamp(payload["expires"], tz=UTC)
        if "expires" in payload
        else None,
    )


def download_resolve(*, token: str, user: User, request=None) -> ResolvedDownload:
    """The file a link stands for, for the signed-in ``user`` it was made for, if its signature holds, it has not
    expired and the user's organisation still holds the entitlement. Refusals are audited with ``user``; a use is
    audited by :func:`download_delivered` once the bytes it delivers (and so their digest) are known."""
    try:
        resolved = _linked_file(token=token, user=user)
    except DomainError as refusal:
        audit_record(
            action="model.downloaded",
            outcome=AuditOutcome.REFUSED,
            actor=user,
            request=request,
            details={"reason": str(refusal)},
        )
        raise
    return resolved


def download_delivered(
    *, resolved: ResolvedDownload, user: User, filename: str, sha256: str, request=None
) -> None:
    """Audit one delivery: which model, in which format, and the SHA-256 of the bytes actually sent (the stored
    file's, or that of the raw-column ONNX or the zip built for this download)."""
    model_file = resolved.model_file
    audit_record(
        action="model.downloaded",
        actor=user,
        target=model_file.global_model,
        request=request,
        details={
            "format": RAW_ONNX if resolved.variant == RAW_ONNX else model_file.format,
            "package": resolved.package,
            "filename": filename,
            "sha256": sha256,
        },
    )


# --- predictions ---


def _bundle_members(data: bytes, *, onnx_twins: bool) -> tuple[list[bytes], list[float], list[str]]:
    try:
        _, members = bundle_read(
            data, max_unpacked_bytes=settings.ONEFOLD_ARCHIVE_MAX_UNPACKED_BYTES
        )
    except ValueError as error:
        raise ModelUnavailable(f"The model's bundle cannot be read: {error}") from error
    return (
        [(onnx_twins and member.onnx_twin) or member.data for member in members],
        [member.weight for member in members],
        [member.feature_view for member in members],
    )


def prediction_models(
    global_model: GlobalModel, *, onnx_twins: bool = False
) -> tuple[list[bytes], list[float], list[str]]:
    """The model bytes the platform predicts with (the ONNX file, else a bundle's members), their weights and the
    feature view each reads (market.feature_views). ``onnx_twins``: a bundle member's ONNX twin where the bundle
    holds one, instead of its own file (for the raw-column ONNX)."""
    files = {model_file.format: model_file for model_file in global_model.files.all()}
    if ArtifactFormat.ONNX in files:
        return (
            [artifact_read(files[ArtifactFormat.ONNX].stored_name)],
            [1.0],
            [global_model_feature_view(global_model)],
        )
    if ArtifactFormat.BUNDLE in files:
        return _bundle_members(
            artifact_read(files[ArtifactFormat.BUNDLE].stored_name), onnx_twins=onnx_twins
        )
    raise ModelUnavailable(
        f"Global model #{global_model.id} has no ONNX file or bundle to predict with."
    )


def global_model_probabilities(
    global_model: GlobalModel, one_hot_features: np.ndarray
) -> np.ndarray:
    """Weighted probabilities of the global model's files on rows in the one-hot view, each file reading its own."""
    models, weights, views = prediction_models(global_model)
    try:
        return stored_ensemble_probabilities(
            models,
            weights=weights,
            views=views,
            features=one_hot_features,
            n_classes=global_model.n_classes,
            feature_spec=global_model.job.public_dataset.feature_spec,
            predict=warm_models_predict,
        )
    except MembersFailed as failure:
        raise ModelUnavailable(
            f"The model could not predict right now ({failure.errors[0][1]}); try again later."
        ) from failure
