"""Generated rows that copy a seed: a generator trained on few seeds (FAug's CTGAN) can memorise them, and publishing
its rows would then publish silos' seed rows verbatim.

A generated row is a **copy** of a seed row when, in every column, the two differ by at most
:data:`NEAR_COPY_TOLERANCE` of that column's range over the seeds (the L∞ distance between the rows, each column
divided by its seed range, is at most the tolerance; a column constant over the seeds counts in its own units).
Exact copies have distance 0; near copies differ only by the generator's numerical noise. Rows are compared as they
are published, in the encoding the seeds were uploaded in, against the seeds of every label.

Pure core: numpy only.
"""

from __future__ import annotations

import numpy as np

#: Largest per-column difference, as a fraction of the column's range over the seeds, of a near copy.
NEAR_COPY_TOLERANCE = 0.01
#: Beyond this fraction of copies among the generated rows, nothing is published.
MAX_COPY_FRACTION = 0.5
#: Elements of one block of the row-by-seed difference tensor (about 32 MB of float64).
_BLOCK_ELEMENTS = 4_000_000


class SeedCopiesError(ValueError):
    """Too many generated rows copy a seed row to publish the rest."""


def seed_copies(generated, seeds, *, tolerance: float = NEAR_COPY_TOLERANCE) -> np.ndarray:
    """Which generated rows are exact or near copies of a seed row.

    Parameters
    ----------
    generated : array (n, d)
        Rows to publish.
    seeds : array (m, d)
        The rows the generator was trained on (m ≥ 1).
    tolerance : float
        Largest per-column difference, as a fraction of the column's seed range, of a copy (≥ 0).

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        True where ``min over seeds of max over columns |g − s| / range`` is at most ``tolerance``.
    """
    generated = np.asarray(generated, dtype=np.float64)
    seeds = np.asarray(seeds, dtype=np.float64)
    if (
        generated.ndim != 2
        or seeds.ndim != 2
        or generated.shape[1] != seeds.shape[1]
        or not len(seeds)
    ):
        raise ValueError(
            "Generated rows and seeds must be matrices with the same number of columns."
        )
    if tolerance < 0:
        raise ValueError(f"The tolerance must be at least 0, not {tolerance}.")
    scale = seeds.max(axis=0) - seeds.min(axis=0)
    scale[scale == 0] = 1.0
    generated, seeds = generated / scale, seeds / scale
    block = max(1, _BLOCK_ELEMENTS // (seeds.shape[0] * max(seeds.shape[1], 1)))
    copies = np.zeros(len(generated), dtype=bool)
    for start in range(0, len(generated), block):
        rows = generated[start : start + block]
        distance = np.abs(rows[:, None, :] - seeds[None, :, :]).max(axis=2).min(axis=1)
        copies[start : start + block] = distance <= tolerance
    return copies


def drop_seed_copies(
    generated, labels, seeds, *, max_fraction: float = MAX_COPY_FRACTION
) -> tuple[np.ndarray, np.ndarray, int]:
    """The generated rows and labels without the copies of a seed row, and how many were dropped.

    Raises
    ------
    SeedCopiesError
        When more than ``max_fraction`` of the rows are copies: the generator memorised its seeds.
    """
    copies = seed_copies(generated, seeds)
    dropped = int(copies.sum())
    if dropped > max_fraction * len(copies):
        raise SeedCopiesError(
            f"{dropped} of the {len(copies)} generated rows copy a seed row (each column within "
            f"{NEAR_COPY_TOLERANCE:.0%} of its range over the seeds), more than {max_fraction:.0%}: the generator "
            "memorised its seeds, so nothing was published. Upload more seeds, or train fewer epochs."
        )
    keep = ~copies
    return np.asarray(generated)[keep], np.asarray(labels)[keep], dropped


__all__ = [
    "MAX_COPY_FRACTION",
    "NEAR_COPY_TOLERANCE",
    "SeedCopiesError",
    "drop_seed_copies",
    "seed_copies",
]
