"""One chunk of a job's members as the job runner stores it between the fan-out and the fusion.

A chunk's members each predict the public data and the evaluation split; :func:`chunk_signals_of` turns those
predictions into every member's summable signal (:meth:`FusionAlgorithm.member_signal`) and its averaged
evaluation probabilities, a :class:`ChunkSignals`. :func:`chunk_signals_to_npz` and
:func:`chunk_signals_from_npz` are the one writer and reader of its stored form: an uncompressed NPZ with the
arrays ``signal_sum``, ``member_signals``, ``member_ids`` and ``evaluation_probabilities``.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the engines' package loads torch; these names are only read by the type checker
    from workers.algorithms.registry import FusionAlgorithm, Member

_ARRAY_NAMES = ("signal_sum", "member_signals", "member_ids", "evaluation_probabilities")


@dataclass(frozen=True)
class ChunkSignals:
    """What one chunk of ``n`` members hands the fusion.

    ``member_ids`` ``(n,)`` int64 are the members' submission ids in the chunk's order; ``member_signals``
    ``(n, n_public, width)`` their signals and ``signal_sum`` ``(n_public, width)`` the signals' sum;
    ``evaluation_probabilities`` ``(n, n_evaluation, K)`` each member's best class probabilities of the evaluation
    split (its silo's own model's when it has one, else its students' average:
    :func:`workers.algorithms.registry.member_probabilities_split`).
    """

    member_ids: np.ndarray
    member_signals: np.ndarray
    signal_sum: np.ndarray
    evaluation_probabilities: np.ndarray


def chunk_signals_of(
    predictions: Sequence[np.ndarray],
    *,
    member_ids: Sequence[int],
    members: Sequence[Member],
    algorithm: FusionAlgorithm,
    n_public: int,
    params: Mapping,
) -> ChunkSignals:
    """A chunk's signals from its members' predictions.

    ``predictions[i]`` are the probabilities ``(n_models, n_public + n_evaluation, K)`` of member ``i``'s models,
    the public rows first; ``member_ids[i]`` and ``members[i]`` name that member.
    """
    # Imported on use: the engines' package loads torch, which the chunk reader (chunk_signals_from_npz) never needs.
    from workers.algorithms.registry import member_probabilities_split

    n_classes = predictions[0].shape[-1]
    signals = np.stack(
        [
            np.asarray(
                algorithm.member_signal(
                    probabilities[:, :n_public], member=member, n_classes=n_classes, params=params
                )
            )
            for probabilities, member in zip(predictions, members, strict=True)
        ]
    )
    return ChunkSignals(
        member_ids=np.asarray(member_ids, dtype=np.int64),
        member_signals=signals,
        signal_sum=signals.sum(axis=0),
        evaluation_probabilities=np.stack(
            [
                member_probabilities_split(probabilities[:, n_public:], member=member).best
                for probabilities, member in zip(predictions, members, strict=True)
            ]
        ),
    )


def chunk_signals_to_npz(signals: ChunkSignals) -> bytes:
    """The stored form of ``signals``: not compressed, since it is read back once or twice and deleted when the
    job ends."""
    buffer = io.BytesIO()
    np.savez(buffer, **{name: getattr(signals, name) for name in _ARRAY_NAMES})
    return buffer.getvalue()


def chunk_signals_from_npz(data: bytes) -> ChunkSignals:
    """The signals :func:`chunk_signals_to_npz` stored; ValueError if ``data`` is not such a file."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            signals = ChunkSignals(**{name: arrays[name] for name in _ARRAY_NAMES})
    except (KeyError, OSError, zipfile.BadZipFile) as error:
        raise ValueError(f"Not a chunk's stored signals: {error}") from error
    n_members = len(signals.member_ids)
    if (
        len(signals.member_signals) != n_members
        or len(signals.evaluation_probabilities) != n_members
    ):
        raise ValueError(
            f"A chunk's stored signals disagree on its number of members ({n_members} ids, "
            f"{len(signals.member_signals)} signals, {len(signals.evaluation_probabilities)} evaluation "
            "predictions)."
        )
    return signals
