"""Generated samples as FAug publishes them for a tabular generator: an ``.npz`` of two arrays, ``features``
(float32, n × n_features) and ``labels`` (int64, n), written without pickle and read with
``allow_pickle=False``, shapes and values checked before use.

A CTGAN (:mod:`workers.algorithms.faug.tabular`) is published as rows it generated, not as the model (its column
encoders, Gaussian mixtures and category lists, are not tensors, and rows keep the seed-copy check in one place).
Only numpy is needed to read them: the silo toolkit never imports the generator.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

SAMPLES_KEYS = ("features", "labels")
MAX_SAMPLES_BYTES = 200_000_000


def samples_save(features, labels) -> bytes:
    """The ``.npz`` bytes of generated rows (float32 features, int64 labels), compressed, no pickle."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    if features.ndim != 2 or labels.shape != (len(features),):
        raise ValueError("Samples are an (n, n_features) matrix with one label per row.")
    buffer = io.BytesIO()
    np.savez_compressed(buffer, features=features, labels=labels)
    return buffer.getvalue()


def samples_load(
    data: bytes, *, n_classes: int, max_bytes: int = MAX_SAMPLES_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """Features (float32, n × n_features, finite) and labels (int64 in ``0 .. n_classes - 1``) of a samples file;
    ValueError with a sentence when it is anything else."""
    if not isinstance(data, (bytes, bytearray)) or len(data) > max_bytes:
        raise ValueError(f"A samples file is at most {max_bytes} bytes of .npz.")
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
        if unpacked > max_bytes:  # checked before numpy unpacks anything
            raise OverflowError(f"it unpacks to {unpacked} bytes, more than {max_bytes}")
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (
        OSError,
        EOFError,
        ValueError,
        OverflowError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
    ) as error:
        raise ValueError(
            f"The samples file is not a readable .npz without pickle: {error}"
        ) from None
    if sorted(arrays) != sorted(SAMPLES_KEYS):
        raise ValueError(
            f"A samples file holds exactly the arrays {', '.join(SAMPLES_KEYS)}, not {sorted(arrays)}."
        )
    features, labels = arrays["features"], arrays["labels"]
    if features.dtype != np.float32 or features.ndim != 2:
        raise ValueError("The samples' 'features' must be a float32 (n, n_features) matrix.")
    if labels.dtype != np.int64 or labels.shape != (len(features),):
        raise ValueError("The samples' 'labels' must be int64, one per row of 'features'.")
    if not np.isfinite(features).all():
        raise ValueError("The samples' features hold NaN or infinite values.")
    if len(labels) and not ((labels >= 0) & (labels < n_classes)).all():
        raise ValueError(f"The samples' labels must lie in 0 .. {n_classes - 1}.")
    return features, labels


__all__ = ["SAMPLES_KEYS", "samples_load", "samples_save"]
