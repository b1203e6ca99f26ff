import numpy as np
import pytest

from workers.partition import dirichlet_label_partition, iid_partition

LABELS = np.repeat(np.arange(4), [300, 200, 100, 400])


def _assert_disjoint_cover(parts, n_examples):
    joined = np.concatenate(parts)
    assert len(joined) == n_examples
    assert np.array_equal(np.sort(joined), np.arange(n_examples))


def test_dirichlet_partition_is_disjoint_and_covers_every_example():
    parts = dirichlet_label_partition(LABELS, 7, beta=0.5, seed=3)
    assert len(parts) == 7
    _assert_disjoint_cover(parts, len(LABELS))


def test_dirichlet_partition_gives_every_party_the_minimum_size():
    parts = dirichlet_label_partition(LABELS, 10, beta=0.1, seed=0, min_size=30)
    assert min(len(part) for part in parts) >= 30


def test_dirichlet_partition_is_reproducible_from_its_seed():
    first = dirichlet_label_partition(LABELS, 5, beta=0.5, seed=42)
    second = dirichlet_label_partition(LABELS, 5, beta=0.5, seed=np.random.default_rng(42))
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    third = dirichlet_label_partition(LABELS, 5, beta=0.5, seed=43)
    assert not all(np.array_equal(a, b) for a, b in zip(first, third))


def test_small_beta_skews_labels_more_than_large_beta():
    def mean_label_entropy(beta):
        entropies = []
        for part in dirichlet_label_partition(LABELS, 5, beta=beta, seed=1):
            shares = np.bincount(LABELS[part], minlength=4) / len(part)
            entropies.append(-(shares[shares > 0] * np.log(shares[shares > 0])).sum())
        return np.mean(entropies)

    assert mean_label_entropy(0.1) < mean_label_entropy(100.0)


def test_dirichlet_partition_refuses_an_impossible_minimum():
    with pytest.raises(ValueError, match="at least 200 each"):
        dirichlet_label_partition(LABELS, 6, beta=0.5, seed=0, min_size=200)


def test_iid_partition_splits_into_near_equal_disjoint_parts():
    parts = iid_partition(103, 4, seed=0)
    _assert_disjoint_cover(parts, 103)
    assert sorted(len(part) for part in parts) == [25, 26, 26, 26]


def test_capped_dirichlet_partition_gives_no_later_class_to_parties_already_at_the_mean_size():
    labels = np.repeat([0, 1], [900, 100])
    parts = dirichlet_label_partition(labels, 5, beta=0.5, seed=2, min_size=1, cap_at_mean=True)
    _assert_disjoint_cover(parts, len(labels))
    for part in parts:
        if np.sum(labels[part] == 0) >= 200:  # reached the mean size (1000 / 5) on class 0
            assert not np.any(labels[part] == 1)
