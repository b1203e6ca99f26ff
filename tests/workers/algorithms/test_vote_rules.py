"""FedKT's vote rules (issue 19, fusion under label skew): consistent_hard (default), class_weighted, soft.

Labels are checked on tiny arrays worked by hand; at L1 the class-weighted vote's sensitivity and ε
are checked against the closed-form Gaussian RDP curve, with Δ = s × the largest weight.
"""

import numpy as np
import pytest

import workers.algorithms  # noqa: F401  (registers the kinds)
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.voting import (
    class_vote_weights,
    label_by_vote,
    soft_vote_scores,
    weighted_consistent_vote_counts,
)
from workers.privacy.mechanisms import GaussianNoise
from workers.privacy.rdp import RENYI_ORDERS

FEDKT = algorithm_get("fedkt")


def hand_gaussian_epsilon(*, n_queries: int, shift: int, sigma: float, delta: float) -> float:
    """Two count coordinates shift by Δ per query: RDP(α) = n·α·Δ²/σ²; then Canonne-Kamath-Steinke's conversion."""
    alpha = RENYI_ORDERS
    curve = n_queries * alpha * shift**2 / sigma**2
    return float(
        np.min(curve + np.log((alpha - 1) / alpha) - (np.log(delta) + np.log(alpha)) / (alpha - 1))
    )


def test_class_weights_are_the_declared_share_of_each_class_relative_to_the_largest_one():
    assert class_vote_weights((30, 10), 2, maximum=4).tolist() == [4, 1]  # 4 × 10/30 = 1.33 → 1
    assert class_vote_weights((10, 30, 20), 3, maximum=4).tolist() == [
        1,
        4,
        3,
    ]  # 4 × 20/30 = 2.67 → 3
    assert class_vote_weights((0, 5), 2, maximum=4).tolist() == [0, 4]  # a class it never saw
    assert class_vote_weights((8, 8), 2, maximum=4).tolist() == [4, 4]
    assert class_vote_weights((8, 1), 2, maximum=4).tolist() == [4, 1]  # 4 × 1/8 = 0.5 rounds up
    assert class_vote_weights(None, 3, maximum=4).tolist() == [4, 4, 4]  # undeclared: full weight
    with pytest.raises(ValueError, match="at least 1"):
        class_vote_weights((1, 1), 2, maximum=0)
    with pytest.raises(ValueError, match="2 non-negative counts"):
        class_vote_weights((0, 0), 2, maximum=4)


# Three parties, s = 2 students, three public examples, two classes.
STUDENTS = np.array(
    [
        [[0, 0, 1], [0, 0, 1]],  # A: consistent everywhere (0, 0, 1)
        [[1, 0, 1], [1, 0, 1]],  # B: consistent everywhere (1, 0, 1)
        [[0, 0, 0], [0, 1, 0]],
    ]
)  # C: consistent on examples 0 and 2 (class 0)
DISTRIBUTIONS = [(10, 90), (10, 90), (50, 100)]  # weights at W = 4: A [0, 4], B [0, 4], C [2, 4]


def test_each_vote_rule_labels_a_tiny_federation_as_worked_by_hand():
    members = [
        Member(
            key=str(i),
            organisation=str(i),
            n_examples=100,
            validation_score=0.0,
            n_models=2,
            label_distribution=d,
        )
        for i, d in enumerate(DISTRIBUTIONS)
    ]
    one_hot = np.eye(2)[STUDENTS]  # hard students as probabilities
    hard = sum(
        FEDKT.member_signal(one_hot[i], member=m, n_classes=2, params={})
        for i, m in enumerate(members)
    )
    assert hard.tolist() == [[4, 2], [4, 0], [2, 4]]  # s = 2 per consistent party
    labels, abstained = label_by_vote(hard, seed=0)
    assert labels.tolist() == [0, 0, 1] and not abstained.any()

    weighted_params = FEDKT.validate({"vote": "class_weighted", "vote_weight_max": 4})
    weighted = sum(
        FEDKT.member_signal(one_hot[i], member=m, n_classes=2, params=weighted_params)
        for i, m in enumerate(members)
    )
    # A vote counts s × weight: example 0: A's 0 counts 0, B's 1 counts 8, C's 0 counts 4; example 1: A and B vote
    # for the class they hardly hold (weight 0); example 2: A 8 + B 8 for class 1, C 4 for class 0.
    assert weighted.tolist() == [[4, 8], [0, 0], [4, 16]]
    assert (
        weighted.tolist()
        == weighted_consistent_vote_counts(STUDENTS, 2, np.array([[0, 4], [0, 4], [2, 4]])).tolist()
    )
    labels, abstained = label_by_vote(weighted, seed=0)
    assert labels[[0, 2]].tolist() == [1, 1] and abstained.tolist() == [False, True, False]

    probabilities = np.array(
        [
            [[[0.6, 0.4]], [[0.9, 0.1]]],  # party A's two students on one example
            [[[0.2, 0.8]], [[0.4, 0.6]]],
        ]
    )  # party B's
    soft_params = FEDKT.validate({"vote": "soft"})
    soft = sum(
        FEDKT.member_signal(probabilities[i], member=members[i], n_classes=2, params=soft_params)
        for i in range(2)
    )
    assert soft == pytest.approx(
        np.array([[0.75 + 0.3, 0.25 + 0.7]])
    )  # students averaged, parties summed
    assert soft == pytest.approx(soft_vote_scores(probabilities))
    assert label_by_vote(soft, seed=0)[0].tolist() == [0]  # 1.05 > 0.95; a hard vote would tie


def test_the_default_vote_is_the_papers_and_is_not_stored():
    assert "vote" not in FEDKT.validate({}) and "vote" not in FEDKT.validate(
        {"vote": "consistent_hard"}
    )
    assert FEDKT.validate({"vote": "class_weighted"})["vote_weight_max"] == 4
    assert FEDKT.votes_per_submission(FEDKT.validate({"partitions": 3})) == 3
    assert (
        FEDKT.votes_per_submission(
            FEDKT.validate({"partitions": 3, "vote": "class_weighted", "vote_weight_max": 5})
        )
        == 15
    )
    for params, message in (
        ({"vote": "majority"}, "'vote' must be one of"),
        ({"vote_weight_max": 2}, 'applies to "vote": "class_weighted" or "auto" only'),
        ({"vote": "class_weighted", "vote_weight_max": 17}, "'vote_weight_max' must be a whole"),
        ({"vote": "class_weighted", "vote_weight_max": True}, "'vote_weight_max' must be a whole"),
    ):
        with pytest.raises(ValueError, match=message):
            FEDKT.validate(params)
    assert "consistent_hard | class_weighted | soft" in FEDKT.help["vote"]  # the launcher's help


def test_class_weighted_at_l1_reports_the_hand_computed_sensitivity_and_epsilon():
    rng = np.random.default_rng(0)
    n_public, sigma, delta = 40, 60.0, 1e-5
    members = [
        Member(
            key="a",
            organisation="north",
            n_examples=100,
            validation_score=0.0,
            n_models=2,
            label_distribution=(70, 30),
        ),
        Member(
            key="b",
            organisation="north",
            n_examples=50,
            validation_score=0.0,
            n_models=2,
            label_distribution=(5, 45),
        ),
        Member(
            key="c",
            organisation="south",
            n_examples=80,
            validation_score=0.0,
            n_models=2,
            label_distribution=None,
        ),
    ]
    params = {
        "vote": "class_weighted",
        "vote_weight_max": 3,
        "final_model": {"family": "logistic_regression"},
        "privacy": {"delta": delta},
    }
    signal = sum(
        FEDKT.member_signal(
            np.eye(2)[rng.integers(0, 2, size=(2, n_public))], member=m, n_classes=2, params=params
        )
        for m in members
    )
    fusion = FEDKT.fuse(
        signal,
        rng.normal(size=(n_public, 3)),
        members=members,
        n_classes=2,
        params=params,
        noise=GaussianNoise(sigma=sigma),
        seed=0,
    )
    report = fusion.privacy.data_independent
    # North holds two submissions of s = 2 students weighted up to W = 3: its data moves 2 × 2 × 3 = 12 votes.
    assert report.vote_shift == 12
    assert report.epsilon == pytest.approx(
        hand_gaussian_epsilon(n_queries=n_public, shift=12, sigma=sigma, delta=delta), rel=1e-9
    )


def test_soft_votes_are_refused_with_noise():
    with pytest.raises(ValueError, match="Soft voting cannot run at L1"):
        FEDKT.fuse(
            np.ones((12, 2)),
            np.zeros((12, 3)),
            members=[],
            n_classes=2,
            params={"vote": "soft"},
            noise=GaussianNoise(sigma=10.0),
            seed=0,
        )
