"""A chunk's signals: computed from its members' predictions, and written to and read from its stored NPZ."""

import io

import numpy as np
import pytest

from workers.algorithms import algorithm_get
from workers.algorithms.registry import Member
from workers.jobs.chunks import (
    ChunkSignals,
    chunk_signals_from_npz,
    chunk_signals_of,
    chunk_signals_to_npz,
)


def _member(key: str) -> Member:
    return Member(key=key, organisation="1", n_examples=10, validation_score=0.5, n_models=2)


def test_a_chunks_evaluation_probabilities_are_a_members_own_model_and_its_votes_its_students():
    # one student then the own model; rows 0-1 public, row 2 the evaluation split
    probabilities = np.array(
        [[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], [[0.1, 0.9], [0.1, 0.9], [0.3, 0.7]]]
    )
    member = Member(
        key="7", organisation="1", n_examples=10, validation_score=0.5, n_models=2, own_model=True
    )
    fedkt = chunk_signals_of(
        [probabilities],
        member_ids=[7],
        members=[member],
        algorithm=algorithm_get("fedkt"),
        n_public=2,
        params={"partitions": 2},
    )
    assert fedkt.member_signals.tolist() == [[[1, 0], [0, 1]]]  # s_i = 1: the student's votes alone
    assert fedkt.evaluation_probabilities.tolist() == [[[0.3, 0.7]]]  # the own model's
    ensemble = chunk_signals_of(
        [probabilities],
        member_ids=[7],
        members=[member],
        algorithm=algorithm_get("ensemble"),
        n_public=2,
        params={},
    )
    assert ensemble.member_signals.tolist() == [[[0.1, 0.9], [0.1, 0.9]]]


def test_a_chunks_fedkt_signals_are_its_members_consistent_votes_and_averaged_evaluation():
    # two members of two students each; rows 0-1 are public, row 2 the evaluation split
    agreeing = np.array(
        [[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], [[0.7, 0.3], [0.4, 0.6], [0.2, 0.8]]]
    )
    split = np.array([[[0.9, 0.1], [0.2, 0.8], [1.0, 0.0]], [[0.3, 0.7], [0.1, 0.9], [0.0, 1.0]]])
    signals = chunk_signals_of(
        [agreeing, split],
        member_ids=[7, 3],
        members=[_member("7"), _member("3")],
        algorithm=algorithm_get("fedkt"),
        n_public=2,
        params={"partitions": 2},
    )
    assert signals.member_ids.dtype == np.int64
    assert signals.member_ids.tolist() == [7, 3]
    # s = 2 votes where both students agree, none where they do not
    assert signals.member_signals.tolist() == [[[2, 0], [0, 2]], [[0, 0], [0, 2]]]
    assert signals.signal_sum.tolist() == [[2, 0], [0, 4]]
    assert np.allclose(signals.evaluation_probabilities, [[[0.4, 0.6]], [[0.5, 0.5]]])


def _signals() -> ChunkSignals:
    member_signals = np.arange(12, dtype=np.float64).reshape(2, 3, 2)
    return ChunkSignals(
        member_ids=np.array([11, 5], dtype=np.int64),
        member_signals=member_signals,
        signal_sum=member_signals.sum(axis=0),
        evaluation_probabilities=np.array([[[0.25, 0.75]], [[1.0, 0.0]]]),
    )


def test_stored_signals_read_back_equal_with_their_dtypes():
    written = _signals()
    read = chunk_signals_from_npz(chunk_signals_to_npz(written))
    for name in ("member_ids", "member_signals", "signal_sum", "evaluation_probabilities"):
        assert np.array_equal(getattr(read, name), getattr(written, name))
        assert getattr(read, name).dtype == getattr(written, name).dtype


def test_signals_stored_as_the_runner_stored_them_before_read_back():
    # the form a running job's chunks already have in storage: np.savez with these four names
    written = _signals()
    buffer = io.BytesIO()
    np.savez(
        buffer,
        signal_sum=written.signal_sum,
        member_signals=written.member_signals,
        member_ids=written.member_ids,
        evaluation_probabilities=written.evaluation_probabilities,
    )
    read = chunk_signals_from_npz(buffer.getvalue())
    assert read.member_ids.tolist() == [11, 5]
    assert read.signal_sum.tolist() == [[6, 8], [10, 12], [14, 16]]
    with np.load(io.BytesIO(chunk_signals_to_npz(written))) as stored:
        assert sorted(stored.files) == sorted(np.load(io.BytesIO(buffer.getvalue())).files)
        assert not any(info.compress_type for info in stored.zip.infolist())  # not compressed


def test_a_file_missing_an_array_or_a_member_is_refused_with_a_sentence():
    written = _signals()
    buffer = io.BytesIO()
    np.savez(buffer, signal_sum=written.signal_sum, member_ids=written.member_ids)
    with pytest.raises(ValueError, match="Not a chunk's stored signals"):
        chunk_signals_from_npz(buffer.getvalue())
    buffer = io.BytesIO()
    np.savez(
        buffer,
        signal_sum=written.signal_sum,
        member_signals=written.member_signals,
        member_ids=written.member_ids[:1],
        evaluation_probabilities=written.evaluation_probabilities,
    )
    with pytest.raises(ValueError, match=r"\(1 ids, 2 signals, 2 evaluation predictions\)"):
        chunk_signals_from_npz(buffer.getvalue())
    with pytest.raises(ValueError):
        chunk_signals_from_npz(b"not a zip file")
