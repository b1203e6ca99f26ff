import numpy as np
import pytest

from workers.algorithms.voting import consistent_vote_counts, label_by_vote, vote_counts


def test_vote_counts_counts_teachers_per_class():
    predictions = np.array([[0, 1, 2, 1], [0, 1, 1, 1], [2, 1, 0, 0]])
    assert vote_counts(predictions, 3).tolist() == [[2, 0, 1], [0, 3, 0], [1, 1, 1], [1, 2, 0]]


def test_vote_counts_rows_sum_to_the_number_of_teachers():
    predictions = np.random.default_rng(0).integers(0, 4, size=(5, 100))
    assert (vote_counts(predictions, 4).sum(axis=1) == 5).all()


def test_vote_counts_refuses_classes_outside_the_class_list():
    with pytest.raises(ValueError, match="0..1"):
        vote_counts(np.array([[0, 2]]), 2)


def test_consistent_vote_counts_adds_s_votes_only_for_consistent_parties():
    # 3 parties, s = 2 students each, 4 public examples
    predictions = np.array(
        [
            [[0, 1, 1, 2], [0, 1, 0, 2]],  # party 0: consistent on examples 0, 1, 3
            [[0, 2, 1, 1], [1, 2, 1, 0]],  # party 1: consistent on examples 1, 2
            [[0, 0, 2, 0], [0, 1, 2, 2]],  # party 2: consistent on examples 0, 2
        ]
    )
    counts = consistent_vote_counts(predictions, 3, partitions=2)
    assert counts.tolist() == [[4, 0, 0], [0, 2, 2], [0, 2, 2], [0, 0, 2]]


def test_consistent_vote_counts_leaves_an_all_zero_row_when_no_party_is_consistent():
    predictions = np.array([[[0, 1], [1, 1]], [[1, 1], [0, 1]]])
    counts = consistent_vote_counts(predictions, 2, partitions=2)
    assert counts.tolist() == [[0, 0], [0, 4]]
    labels, abstained = label_by_vote(counts, seed=0)
    assert abstained.tolist() == [True, False]
    assert labels[1] == 1


def test_consistent_vote_counts_with_three_partitions_adds_three_votes():
    predictions = np.array([[[2, 0], [2, 0], [2, 1]]])
    assert consistent_vote_counts(predictions, 3, partitions=3).tolist() == [[0, 0, 3], [0, 0, 0]]


def test_consistent_vote_counts_refuses_a_wrong_partition_count():
    with pytest.raises(ValueError, match="2 students per party but partitions=3"):
        consistent_vote_counts(np.zeros((1, 2, 3), dtype=int), 2, partitions=3)


def test_label_by_vote_draws_each_tied_class_about_equally_often_and_never_an_untied_one():
    counts = np.tile([[5, 5, 1], [0, 3, 3]], (2000, 1))
    labels, abstained = label_by_vote(counts, seed=7)
    first, second = labels[0::2], labels[1::2]
    assert set(first.tolist()) == {0, 1} and set(second.tolist()) == {1, 2}
    assert 0.45 < np.mean(first == 0) < 0.55 and 0.45 < np.mean(second == 1) < 0.55
    assert not abstained.any()


def test_label_by_vote_ties_do_not_depend_on_how_classes_are_numbered():
    """Renumbering the classes (reversing the columns) renumbers the labels and nothing else:
    the tie rule favours no index."""
    counts = np.random.default_rng(3).integers(0, 3, size=(4000, 2))
    labels, _ = label_by_vote(counts, seed=11)
    reversed_labels, _ = label_by_vote(counts[:, ::-1], seed=11)
    tied = counts[:, 0] == counts[:, 1]
    assert np.mean(labels[tied] == 0) == pytest.approx(
        np.mean(reversed_labels[tied] == 0), abs=0.05
    )
    assert np.array_equal(labels[~tied], 1 - reversed_labels[~tied])


def test_label_by_vote_is_reproducible_for_a_seed_and_keeps_clear_winners():
    counts = np.array([[2, 2, 0], [0, 3, 4], [1, 1, 1]])
    first, _ = label_by_vote(counts, seed=5)
    again, _ = label_by_vote(counts, seed=5)
    assert first.tolist() == again.tolist()
    assert first[1] == 2 and first[0] in (0, 1)


def test_label_by_vote_abstains_on_noisy_rows_whose_maximum_is_not_positive():
    labels, abstained = label_by_vote(np.array([[-1, -3], [0, 0], [-2, 1]]), seed=0)
    assert abstained.tolist() == [True, True, False]
    assert labels[2] == 1
