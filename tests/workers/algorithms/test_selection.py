import pytest

from workers.algorithms.registry import Member
from workers.algorithms.selection import select_members

# position:          0     1     2     3     4     5
SCORES = (0.70, 0.90, 0.80, 0.90, 0.55, 0.80)
EXAMPLES = (50, 400, 120, 120, 900, 10)
MEMBERS = [
    Member(key=str(i), organisation=f"o{i}", n_examples=n, validation_score=s)
    for i, (s, n) in enumerate(zip(SCORES, EXAMPLES))
]


def test_all_keeps_every_member():
    assert select_members(MEMBERS, strategy="all") == [0, 1, 2, 3, 4, 5]


def test_cross_validation_keeps_scores_at_or_above_the_threshold():
    assert select_members(MEMBERS, strategy="cross_validation", threshold=0.8) == [1, 2, 3, 5]


def test_cross_validation_top_k_breaks_ties_by_position():
    # 0.9 (1), 0.9 (3), then the tie 0.8 at positions 2 and 5: position 2 wins
    assert select_members(MEMBERS, strategy="cross_validation", k=3) == [1, 2, 3]


def test_cross_validation_threshold_then_top_k():
    assert select_members(MEMBERS, strategy="cross_validation", threshold=0.75, k=1) == [1]


def test_data_keeps_the_k_largest_above_the_threshold():
    assert select_members(MEMBERS, strategy="data", threshold=100) == [1, 2, 3, 4]
    assert select_members(MEMBERS, strategy="data", threshold=100, k=2) == [1, 4]
    assert select_members(MEMBERS, strategy="data", k=3) == [
        1,
        2,
        4,
    ]  # 120 tie: position 2 before 3


def test_k_larger_than_the_pool_keeps_the_pool():
    assert select_members(MEMBERS, strategy="cross_validation", threshold=0.85, k=50) == [1, 3]
    assert select_members(MEMBERS, strategy="random", k=50, seed=1) == [0, 1, 2, 3, 4, 5]


def test_random_is_seeded_and_draws_k_distinct_members():
    first = select_members(MEMBERS, strategy="random", k=3, seed=11)
    assert first == select_members(MEMBERS, strategy="random", k=3, seed=11)
    assert len(set(first)) == 3 and first == sorted(first)
    assert {tuple(select_members(MEMBERS, strategy="random", k=3, seed=s)) for s in range(20)} != {
        tuple(first)
    }


def test_a_threshold_nobody_passes_is_refused_with_the_threshold():
    with pytest.raises(ValueError, match="validation score of at least 0.95"):
        select_members(MEMBERS, strategy="cross_validation", threshold=0.95)
    with pytest.raises(ValueError, match="number of local examples of at least 1000"):
        select_members(MEMBERS, strategy="data", threshold=1000)


def test_an_empty_pool_is_refused():
    with pytest.raises(ValueError, match="no members"):
        select_members([], strategy="all")
