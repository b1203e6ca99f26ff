"""A statistics upload read back: shapes checked against the federation before any array is built (issue 40)."""

import json

import numpy as np
import pytest

from workers.algorithms.sufficient_statistics import (
    class_statistics,
    statistics_document,
    statistics_document_size_limit,
    statistics_from_bytes,
    statistics_from_document,
    statistics_sum,
)


def document(**changes):
    statistics = class_statistics(
        np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]), [0, 1, 1], n_classes=2, clip_norm=2.0
    )
    return {**statistics_document(statistics, noise=None), **changes}


def test_a_document_reads_back_to_the_statistics_it_was_written_from():
    read = statistics_from_document(document(), n_classes=2, n_features=2)
    np.testing.assert_array_equal(read.counts, [1, 2])
    # rows scaled by 1/max(‖x‖, 2): [0.5, 0], [0, 1], [0.6, 0.8]
    np.testing.assert_allclose(read.sums, [[0.5, 0.0], [0.6, 1.8]])
    np.testing.assert_allclose(read.moment, [[0.61, 0.48], [0.48, 1.64]])
    np.testing.assert_allclose(read.squares, [[0.25, 0.0], [0.36, 1.64]])
    assert read.clip_norm == 2.0


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"format": "pickle"}, 'a JSON object with "format": "onefold-statistics"'),
        ({"version": 9}, "reads statistics version 1, not 9"),
        ({"clip_norm": 0}, "'clip_norm' must be the positive clip norm"),
        ({"sums": [[1.0, 2.0]]}, "'sums' must be 2 × 2 numbers"),
        ({"moment": [[1.0, 2.0], [3.0, "x"]]}, "'moment' must be 2 × 2 numbers"),
        ({"moment": [[1.0, 2.0], [3.0, 1.0]]}, "'moment' must be a symmetric matrix"),
        ({"counts": [1.0, float("nan")]}, "'counts' holds a value that is not a finite number"),
    ],
)
def test_a_bad_document_is_refused_with_a_sentence_naming_what_to_fix(changes, message):
    with pytest.raises(ValueError, match=message):
        statistics_from_document(document(**changes), n_classes=2, n_features=2)


def test_a_document_for_another_width_is_refused_before_its_numbers_are_read():
    with pytest.raises(ValueError, match="'sums' must be 2 × 108 numbers"):
        statistics_from_document(document(), n_classes=2, n_features=108)


def test_statistics_of_another_clip_norm_do_not_add_up():
    one = class_statistics(np.ones((2, 2)), [0, 1], n_classes=2, clip_norm=1.0)
    other = class_statistics(np.ones((2, 2)), [0, 1], n_classes=2, clip_norm=2.0)
    with pytest.raises(ValueError, match="clip norm 2 to statistics of 2, 2, 1"):
        statistics_sum([one, other])


def test_a_file_over_the_size_its_shapes_allow_is_refused_before_it_is_parsed():
    limit = statistics_document_size_limit(n_classes=2, n_features=2)
    assert limit == 32 * (2 + 8 + 4) + 4096
    with pytest.raises(
        ValueError, match=f"holds at most {limit:,} bytes; this one holds {limit + 1:,}"
    ):
        statistics_from_bytes(b" " * (limit + 1), n_classes=2, n_features=2)
    with pytest.raises(ValueError, match="A statistics file is JSON; this one is not"):
        statistics_from_bytes(b"\x80\x04pickle", n_classes=2, n_features=2)
    read = statistics_from_bytes(json.dumps(document()).encode(), n_classes=2, n_features=2)
    np.testing.assert_array_equal(read.counts, [1, 2])
