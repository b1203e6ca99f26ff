"""A public-data file kept between its preview and the upload that confirms it (issue 43 item 3: a preview forgot
the chosen file, and a browser cannot put a file back into a form).

The preview keeps the file in storage under a random key, in a folder of the operator and the federation, and the
page carries the key; "Upload public data" with no new file chosen reads the kept file. A key opens only its own
operator's file of its own federation, so a key seen by someone else opens nothing. One file is kept per operator
and federation: a new preview replaces the last, and the upload that used it removes it.
"""

import re
import secrets
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils.text import get_valid_filename

from market.accounts.models import User
from market.errors import InvalidInput
from market.federations.models import Federation
from market.federations.services import feature_spec_preview

PREVIEW_FOLDER = "previewed-public-data"
_KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


@dataclass(frozen=True)
class PublicDataPreview:
    """The feature specification a file would give, the key of the kept file and the file's name."""

    spec: dict
    key: str
    file_name: str


def _folder(*, federation: Federation, user: User) -> str:
    return f"{PREVIEW_FOLDER}/{federation.id}/{user.id}"


def _kept_names(folder: str) -> list[str]:
    """``key/file name`` of every file kept in ``folder``."""
    if not default_storage.exists(folder):
        return []
    keys, _ = default_storage.listdir(folder)
    return [
        f"{key}/{name}" for key in keys for name in default_storage.listdir(f"{folder}/{key}")[1]
    ]


def public_data_preview(
    *, federation: Federation, data: bytes, file_name: str, user: User
) -> PublicDataPreview:
    """The specification ``data`` would give (:func:`feature_spec_preview` checks the operator and the file) and
    the file kept for the upload that confirms it, in place of this operator's last preview here."""
    spec = feature_spec_preview(federation=federation, data=data, user=user)
    previewed_public_data_discard(federation=federation, user=user)
    key = secrets.token_urlsafe(32)
    safe_name = get_valid_filename(PurePosixPath(file_name).name or "public-data") or "public-data"
    default_storage.save(
        f"{_folder(federation=federation, user=user)}/{key}/{safe_name}", ContentFile(data)
    )
    return PublicDataPreview(spec=spec, key=key, file_name=safe_name)


def previewed_public_data_read(*, federation: Federation, user: User, key: str) -> bytes:
    """The bytes of the file this operator previewed here under ``key``; a sentence if there is none."""
    folder = _folder(federation=federation, user=user)
    names = (
        [name for name in _kept_names(folder) if name.startswith(f"{key}/")]
        if _KEY_PATTERN.fullmatch(key)
        else []
    )
    if not names:
        raise InvalidInput(
            "The previewed file is no longer kept (a later preview replaced it, or it was uploaded); "
            "choose the file again.",
            field="file",
        )
    with default_storage.open(f"{folder}/{names[0]}", "rb") as kept:
        return kept.read()


def previewed_public_data_discard(*, federation: Federation, user: User) -> None:
    """Remove the file this operator keeps from a preview of this federation's public data, if any."""
    folder = _folder(federation=federation, user=user)
    for name in _kept_names(folder):
        default_storage.delete(f"{folder}/{name}")
