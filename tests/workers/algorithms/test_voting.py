import numpy as np
import pytest

from workers.algorithms.voting import consistent_vote_counts, label_by_vote, vote_counts


def test_vote_counts_counts_teachers_per_class():
    predictions = np.array([[0, 1, 2, 1],
                            [0, 1, 1, 1],
                            [2, 1, 0, 0]])
    assert vote_counts(predictions, 3).tolist() == [[2, 0, 1], [0, 3, 0], [1, 1, 1], [1, 2, 0]]


def test_vote_counts_rows_sum_to_the_number_of_teachers():
    predictions = np.random.default_rng(0).integers(0, 4, size=(5, 100))
    assert (vote_counts(predictions, 4).sum(axis=1) == 5).all()


def test_vote_counts_refuses_classes_outside_the_class_list():
    with pytest.raises(ValueError, match="0..1"):
        vote_counts(np.array([[0, 2]]), 2)


def test_consistent_vote_counts_adds_s_votes_only_for_consistent_parties():
    # 3 parties, s = 2 students each, 4 public examples
    predictions = np.array([
        [[0, 1, 1, 2], [0, 1, 0, 2]],   # party 0: consistent on examples 0, 1, 3
        [[0, 2, 1, 1], [1, 2, 1, 0]],   # party 1: consistent on examples 1, 2
        [[0, 0, 2, 0], [0, 1, 2, 2]],   # party 2: consistent on examples 0, 2
    ])
    counts = consistent_vote_counts(predictions, 3, partitions=2)
    assert counts.tolist() == [[4, 0, 0], [0, 2, 2], [0, 2, 2], [0, 0, 2]]


def test_consistent_vote_counts_leaves_an_all_zero_row_when_no_party_is_consistent():
    predictions = np.array([[[0, 1], [1, 1]], [[1, 1], [0, 1]]])
    counts = consistent_vote_counts(predictions, 2, partitions=2)
    assert counts.tolist() == [[0, 0], [0, 4]]
    labels, abstained = label_by_vote(counts)
    assert abstained.tolist() == [True, False]
    assert labels[1] == 1


def test_consistent_vote_counts_with_three_partitions_adds_three_votes():
    predictions = np.array([[[2, 0], [2, 0], [2, 1]]])
    assert consistent_vote_counts(predictions, 3, partitions=3).tolist() == [[0, 0, 3], [0, 0, 0]]


def test_consistent_vote_counts_refuses_a_wrong_partition_count():
    with pytest.raises(ValueError, match="2 students per party but partitions=3"):
        consistent_vote_counts(np.zeros((1, 2, 3), dtype=int), 2, partitions=3)


def test_label_by_vote_breaks_ties_towards_the_lowest_class():
    labels, abstained = label_by_vote(np.array([[2, 2, 0], [0, 3, 3], [1, 1, 1]]))
    assert labels.tolist() == [0, 1, 0]
    assert not abstained.any()


def test_label_by_vote_abstains_on_noisy_rows_whose_maximum_is_not_positive():
    labels, abstained = label_by_vote(np.array([[-1, -3], [0, 0], [-2, 1]]))
    assert abstained.tolist() == [True, True, False]
    assert labels[2] == 1
