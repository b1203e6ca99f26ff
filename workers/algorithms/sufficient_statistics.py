"""A silo's sufficient statistics of its encoded, clipped rows: what the statistics kind fuses (issue 40).

FedCGS (2025) and GH-OFL (2026): class counts, class sums and second moments of a fixed encoding make a server's
linear discriminant or ridge head exactly the centralised one, under any label skew, because they add up over
silos. Rows are clipped to the Euclidean norm C the federation sets and scaled by 1/C (``‖x‖₂ ≤ 1``), which bounds
what one record can move (:mod:`workers.privacy.statistics_noise`).

One silo's statistics, K classes and d encoded features:

- ``counts`` (K,): rows of each class, n_k;
- ``sums`` (K, d): Σ x over the rows of class k;
- ``moment`` (d, d): Σ x xᵀ over all rows (pooled: LDA and ridge need no per-class matrix);
- ``squares`` (K, d) or None: Σ x ⊙ x over the rows of class k (Gaussian naive Bayes' variances).

Uploads are JSON (:func:`statistics_from_document`), their sizes checked against the federation before any work.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.privacy.statistics_noise import StatisticsNoise, gaussian_noise_draw

#: The document format a silo uploads (``"format"``), and its version.
STATISTICS_FORMAT = "onefold-statistics"
STATISTICS_VERSION = 1


@dataclass(frozen=True)
class ClassStatistics:
    """Summable statistics of clipped, scaled rows (see the module docstring for the shapes)."""

    counts: np.ndarray
    sums: np.ndarray
    moment: np.ndarray
    squares: np.ndarray | None
    clip_norm: float

    @property
    def n_classes(self) -> int:
        return len(self.counts)

    @property
    def n_features(self) -> int:
        return self.moment.shape[0]

    def __add__(self, other: ClassStatistics) -> ClassStatistics:
        if (other.n_classes, other.n_features, other.clip_norm) != (
            self.n_classes,
            self.n_features,
            self.clip_norm,
        ):
            raise ValueError(
                f"Cannot add statistics of {other.n_classes} classes, {other.n_features} features, clip norm "
                f"{other.clip_norm:g} to statistics of {self.n_classes}, {self.n_features}, {self.clip_norm:g}."
            )
        squares = (
            None if self.squares is None or other.squares is None else self.squares + other.squares
        )
        return ClassStatistics(
            self.counts + other.counts,
            self.sums + other.sums,
            self.moment + other.moment,
            squares,
            self.clip_norm,
        )


def clipped_scaled(features, *, clip_norm: float) -> np.ndarray:
    """Rows clipped to Euclidean norm ``clip_norm`` and divided by it: every row's norm is at most 1.

    Parameters
    ----------
    features : array_like of float, shape (n_rows, d)
    clip_norm : float
        C > 0, in the units of the encoded features.
    """
    if not (isinstance(clip_norm, (int, float)) and math.isfinite(clip_norm) and clip_norm > 0):
        raise ValueError(f"The clip norm must be a positive number, got {clip_norm!r}.")
    features = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.maximum(norms, clip_norm)


def class_statistics(
    features, labels, *, n_classes: int, clip_norm: float, squares: bool = True
) -> ClassStatistics:
    """The statistics of one silo's rows (features ``(n, d)``, labels ``0..K-1``), clipped to ``clip_norm``."""
    scaled = clipped_scaled(features, clip_norm=clip_norm)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (len(scaled),) or (
        len(labels) and not 0 <= labels.min() <= labels.max() < n_classes
    ):
        raise ValueError(f"Labels must be one class in 0..{n_classes - 1} per row.")
    one_hot = np.eye(n_classes)[labels]
    return ClassStatistics(
        one_hot.sum(axis=0),
        one_hot.T @ scaled,
        scaled.T @ scaled,
        one_hot.T @ scaled**2 if squares else None,
        float(clip_norm),
    )


def statistics_sum(statistics: Sequence[ClassStatistics]) -> ClassStatistics:
    """The federation's statistics: the sum of its silos' (what a central fit on the pooled rows sees)."""
    if not statistics:
        raise ValueError("There are no statistics to add up.")
    total = statistics[0]
    for more in statistics[1:]:
        total = total + more
    return total


def statistics_noised(statistics: ClassStatistics, *, noise: StatisticsNoise) -> ClassStatistics:
    """The statistics with the silo's example-level Gaussian noise added (a block not released is dropped: counts
    and sums are always needed, so those must be released). The second moment's noise is drawn on its upper
    triangle and mirrored, so the released matrix stays symmetric."""
    if noise.counts is None or noise.sums is None or noise.moment is None:
        raise ValueError(
            "The counts, sums and second moment are what every head reads: noise and release all three."
        )
    d = statistics.n_features
    upper = np.triu_indices(d)
    moment_noise = np.zeros((d, d))
    moment_noise[upper] = gaussian_noise_draw((len(upper[0]),), sigma=noise.moment)
    moment_noise = moment_noise + np.triu(moment_noise, 1).T
    squares = None
    if statistics.squares is not None and noise.squares is not None:
        squares = statistics.squares + gaussian_noise_draw(
            statistics.squares.shape, sigma=noise.squares
        )
    return ClassStatistics(
        statistics.counts + gaussian_noise_draw(statistics.counts.shape, sigma=noise.counts),
        statistics.sums + gaussian_noise_draw(statistics.sums.shape, sigma=noise.sums),
        statistics.moment + moment_noise,
        squares,
        statistics.clip_norm,
    )


def statistics_document(statistics: ClassStatistics, *, noise: StatisticsNoise | None) -> dict:
    """The JSON document a silo uploads: its statistics and, at L2, its noise declaration."""
    return {
        "format": STATISTICS_FORMAT,
        "version": STATISTICS_VERSION,
        "clip_norm": statistics.clip_norm,
        "counts": statistics.counts.tolist(),
        "sums": statistics.sums.tolist(),
        "moment": statistics.moment.tolist(),
        "squares": None if statistics.squares is None else statistics.squares.tolist(),
        "privacy": None if noise is None else noise.as_dict(),
    }


#: Characters a statistics document may take per number it holds, and for its keys and declaration: a float's
#: ``repr`` takes at most 24, with ", " and brackets.
CHARACTERS_PER_NUMBER, DOCUMENT_OVERHEAD = 32, 4096


def statistics_document_size_limit(*, n_classes: int, n_features: int) -> int:
    """The most bytes a statistics upload for K classes and d features may hold (counts, sums, second moment and
    squares at :data:`CHARACTERS_PER_NUMBER` each): checked before the upload is parsed."""
    numbers = n_classes + 2 * n_classes * n_features + n_features * n_features
    return CHARACTERS_PER_NUMBER * numbers + DOCUMENT_OVERHEAD


def statistics_from_bytes(data: bytes, *, n_classes: int, n_features: int) -> ClassStatistics:
    """Read an uploaded statistics file: its size checked before it is parsed, then
    :func:`statistics_from_document`. A ValueError says what to fix."""
    limit = statistics_document_size_limit(n_classes=n_classes, n_features=n_features)
    if len(data) > limit:
        raise ValueError(
            f"A statistics file for {n_classes} classes and {n_features} features holds at most {limit:,} bytes; "
            f"this one holds {len(data):,}."
        )
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"A statistics file is JSON; this one is not ({error}).") from None
    return statistics_from_document(document, n_classes=n_classes, n_features=n_features)


def statistics_from_document(document, *, n_classes: int, n_features: int) -> ClassStatistics:
    """Read an uploaded document back, checking its shapes against the federation's before building any array.

    A ValueError says what to fix ("'sums' must be 2 rows of 108 numbers ...")."""
    if not isinstance(document, dict) or document.get("format") != STATISTICS_FORMAT:
        raise ValueError(
            f'A statistics upload is a JSON object with "format": "{STATISTICS_FORMAT}".'
        )
    if document.get("version") != STATISTICS_VERSION:
        raise ValueError(
            f"This market reads statistics version {STATISTICS_VERSION}, not {document.get('version')!r}."
        )
    clip_norm = document.get("clip_norm")
    if isinstance(clip_norm, bool) or not isinstance(clip_norm, (int, float)) or not clip_norm > 0:
        raise ValueError("'clip_norm' must be the positive clip norm the rows were clipped to.")
    shapes = {
        "counts": (n_classes,),
        "sums": (n_classes, n_features),
        "moment": (n_features, n_features),
    }
    if document.get("squares") is not None:
        shapes["squares"] = (n_classes, n_features)
    arrays = {
        name: _numbers(document.get(name), name=name, shape=shape) for name, shape in shapes.items()
    }
    if not np.allclose(
        arrays["moment"],
        arrays["moment"].T,
        rtol=0,
        atol=1e-9 * max(1.0, np.abs(arrays["moment"]).max()),
    ):
        raise ValueError("'moment' must be a symmetric matrix (Σ x xᵀ).")
    return ClassStatistics(
        arrays["counts"], arrays["sums"], arrays["moment"], arrays.get("squares"), float(clip_norm)
    )


def _numbers(value, *, name: str, shape: tuple[int, ...]) -> np.ndarray:
    described = " × ".join(str(size) for size in shape)
    if not _has_shape(value, shape):
        raise ValueError(
            f"'{name}' must be {described} numbers (nested lists), as the federation has them."
        )
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"'{name}' holds a value that is not a finite number.")
    return array


def _has_shape(value, shape: tuple[int, ...]) -> bool:
    """Whether nested lists have exactly ``shape`` with numbers at the leaves, checked without building arrays."""
    if not shape:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return (
        isinstance(value, list)
        and len(value) == shape[0]
        and all(_has_shape(item, shape[1:]) for item in value)
    )
