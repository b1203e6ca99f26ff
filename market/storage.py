"""Artifacts (public data, models) live behind Django's storage API, so that workers on other
machines read them once a shared store is configured. Writes are undone when the database
transaction they belong to fails, so no orphaned file remains."""

import functools
import hashlib
import io
from contextlib import contextmanager

import numpy as np
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def artifacts_removed_on_error():
    """Yield a list; names appended to it are deleted from storage if the block raises."""
    stored_names: list[str] = []
    try:
        yield stored_names
    except BaseException:
        for name in stored_names:
            default_storage.delete(name)
        raise


def artifact_save(*, name: str, data: bytes, stored_names: list[str]) -> str:
    """Save bytes under ``name`` (storage may alter it to stay unique) and record the final name."""
    final_name = default_storage.save(name, ContentFile(data))
    stored_names.append(final_name)
    return final_name


def artifact_read(name: str) -> bytes:
    with default_storage.open(name, "rb") as artifact:
        return artifact.read()


def arrays_to_npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def arrays_from_npz(name: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(artifact_read(name)), allow_pickle=False) as arrays:
        return {key: arrays[key] for key in arrays.files}


@functools.lru_cache(maxsize=8)
def arrays_from_npz_cached(name: str) -> dict[str, np.ndarray]:
    """:func:`arrays_from_npz`, read once per process: for immutable artifacts (a public dataset, an evaluation
    split). The dict is shared; copy it before changing it."""
    return arrays_from_npz(name)
