"""Contribution values (workers.valuation): exact Shapley against the formula read literally over a vote counted
by hand, efficiency, the permutation estimator against the exact one, and a constant silo on Adult."""

from itertools import combinations
from math import factorial

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression

from workers.datasets import load_adult
from workers.partition import iid_partition
from workers.valuation import (
    contribution_values,
    duplicate_groups,
    order_values,
    permutation_shapley,
    rank_band,
    silo_scores,
    stratified_orders,
)


def brute_force_shapley(value_of, players):
    """The Shapley formula read literally: every player, every subset of the others."""
    n = len(players)
    result = {}
    for player in players:
        others = [p for p in players if p != player]
        total = 0.0
        for size in range(n):
            for coalition in combinations(others, size):
                weight = factorial(size) * factorial(n - size - 1) / factorial(n)
                total += weight * (value_of(set(coalition) | {player}) - value_of(set(coalition)))
        result[player] = total
    return result


def hand_counted_vote_accuracy(predictions, labels, coalition, n_classes, balanced):
    """A plurality vote counted row by row in plain Python; ties scored as a uniform draw among the tied."""
    correct = []
    for row, label in enumerate(labels):
        counts = [0] * n_classes
        for silo in coalition:
            for member in predictions[silo]:
                counts[int(np.argmax(member[row]))] += 1
        top = max(counts)
        tied = [c for c in range(n_classes) if counts[c] == top]
        correct.append((1 / len(tied)) if label in tied else 0.0)
    correct = np.array(correct)
    if not balanced:
        return correct.mean()
    return np.mean([correct[labels == c].mean() for c in np.unique(labels)])


def random_silos(n_silos, n_rows=60, n_classes=3, seed=0):
    generator = np.random.default_rng(seed)
    labels = generator.integers(0, n_classes, n_rows)
    silos = {}
    for silo in range(n_silos):
        skill = generator.uniform(0.2, 0.9)
        members = []
        for _ in range(generator.integers(1, 3)):
            logits = generator.normal(size=(n_rows, n_classes))
            logits[np.arange(n_rows), labels] += 3 * skill
            members.append(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))
        silos[f"{silo + 1}"] = members
    return silos, labels


@pytest.mark.parametrize("measure", ["balanced_accuracy", "accuracy"])
def test_exact_shapley_of_the_vote_matches_the_formula_over_a_hand_counted_vote(measure):
    silos, labels = random_silos(5)
    values = contribution_values(silos, labels, rule="vote", n_classes=3)
    expected = brute_force_shapley(
        lambda coalition: hand_counted_vote_accuracy(
            silos, labels, coalition, 3, balanced=measure == "balanced_accuracy"
        ),
        list(silos),
    )
    assert values["estimator"] == "exact" and values["permutations"] is None
    for silo, value in expected.items():
        assert values["silos"][silo]["shapley"][measure] == pytest.approx(value, abs=1e-12)
        assert values["silos"][silo]["standard_error"] is None
    # efficiency: the values add up to the grand coalition over the empty one (the uniform guess, 1/3)
    total = sum(silo["shapley"][measure] for silo in values["silos"].values())
    assert values["empty_coalition"][measure] == pytest.approx(1 / 3)
    assert total == pytest.approx(values["grand_coalition"][measure] - 1 / 3)
    everyone = set(silos)
    for silo in silos:
        loo = hand_counted_vote_accuracy(
            silos, labels, everyone, 3, measure == "balanced_accuracy"
        ) - hand_counted_vote_accuracy(
            silos, labels, everyone - {silo}, 3, measure == "balanced_accuracy"
        )
        assert values["silos"][silo]["leave_one_out"][measure] == pytest.approx(loo, abs=1e-12)


def test_average_rule_sums_probabilities():
    silos = {"a": [np.array([[0.9, 0.1], [0.4, 0.6]])], "b": [np.array([[0.2, 0.8], [0.3, 0.7]])]}
    labels = np.array([0, 1])
    values = contribution_values(silos, labels, rule="average", n_classes=2)
    # all: row 0 sums (1.1, 0.9) → 0 correct, row 1 → 1 correct; a alone: both; b alone: row 1 only
    assert values["grand_coalition"]["accuracy"] == 1.0
    assert values["silos"]["a"]["shapley"]["accuracy"] == pytest.approx(
        0.5 * (1 - 0.5) + 0.5 * (1 - 0.5)
    )
    assert values["silos"]["b"]["shapley"]["accuracy"] == pytest.approx(
        0.5 * (0.5 - 0.5) + 0.5 * (1 - 1)
    )


def test_permutation_sampling_ranks_as_the_exact_values_do_and_reports_its_error():
    silos, labels = random_silos(9, n_rows=300, seed=3)
    exact = contribution_values(silos, labels, rule="average", n_classes=3)
    scores_silos, scores = silo_scores(silos, rule="average", n_classes=3)
    estimates, errors = permutation_shapley(scores, labels, n_classes=3, permutations=400, seed=1)
    exact_values = [exact["silos"][s]["shapley"]["balanced_accuracy"] for s in scores_silos]
    assert spearmanr(exact_values, estimates["balanced_accuracy"]).statistic >= 0.9
    for silo, value in enumerate(exact_values):
        assert (
            abs(estimates["balanced_accuracy"][silo] - value)
            <= 4 * errors["balanced_accuracy"][silo] + 1e-9
        )


@pytest.mark.parametrize(
    ("rule", "n_classes"), [("vote", 2), ("vote", 3), ("average", 2), ("average", 3)]
)
def test_an_orders_cumulative_margins_score_each_growing_coalition_as_a_literal_recount(
    rule, n_classes
):
    """order_values' cumulative sums of margins against each growing coalition's class scores summed and read row
    by row (votes tie often: whole numbers)."""
    silos, labels = random_silos(7, n_rows=120, n_classes=n_classes, seed=17)
    _, scores = silo_scores(silos, rule=rule, n_classes=n_classes)
    orders = stratified_orders(7, permutations=28, seed=5)[::5]
    values = order_values(scores, labels, orders, n_classes=n_classes)
    for index, order in enumerate(orders):
        for size in range(len(order) + 1):
            for measure, balanced in (("accuracy", False), ("balanced_accuracy", True)):
                assert values[measure][index, size] == pytest.approx(
                    hand_counted_accuracy(scores, labels, order[:size], n_classes, balanced)
                )
    assert values["accuracy"][:, 0] == pytest.approx(1 / n_classes)  # empty: a uniform guess


def hand_counted_accuracy(scores, labels, coalition, n_classes, balanced):
    """A coalition's summed class scores read row by row; ties scored as a uniform draw among the tied."""
    correct = []
    for row, label in enumerate(labels):
        summed = [sum(scores[silo][row][c] for silo in coalition) for c in range(n_classes)]
        tied = [c for c in range(n_classes) if summed[c] >= max(summed) - 1e-9]
        correct.append(1 / len(tied) if label in tied else 0.0)
    correct = np.array(correct)
    if not balanced:
        return correct.mean()
    return np.mean([correct[labels == c].mean() for c in np.unique(labels)])


def test_beyond_twelve_silos_the_permutation_estimator_is_used_and_documented():
    silos, labels = random_silos(13, n_rows=40, seed=5)
    values = contribution_values(silos, labels, rule="vote", n_classes=3, permutations=30)
    # 30 orders rounded up to whole blocks of 2 × 13, at least two blocks
    assert values["estimator"] == "permutation" and values["permutations"] == 52
    assert all(
        silo["standard_error"]["balanced_accuracy"] >= 0 for silo in values["silos"].values()
    )
    assert sorted(silo["rank"] for silo in values["silos"].values()) == list(range(1, 14))


def test_stratified_orders_put_every_silo_at_every_position_twice_per_block():
    orders = stratified_orders(5, permutations=21, seed=2)
    assert orders.shape == (30, 5)  # 21 rounded up to blocks of 10: three blocks
    for block in orders.reshape(3, 10, 5):
        assert all(sorted(order) == list(range(5)) for order in block)
        for position in range(5):
            assert sorted(np.bincount(block[:, position], minlength=5)) == [2] * 5
        assert (block[5:] == block[:5, ::-1]).all()  # the second half reverses the first


def test_duplicate_groups_join_identical_and_nearly_identical_silos_only():
    silos, _ = random_silos(4, seed=7)
    silos["5"] = [member.copy() for member in silos["2"]]
    silos["6"] = [
        np.clip(member + 0.004, 0, 1) for member in silos["5"]
    ]  # a copy of a copy, nudged
    assert duplicate_groups(silos, n_classes=3) == [["1"], ["2", "5", "6"], ["3"], ["4"]]


@pytest.mark.parametrize("rule", ["vote", "average"])
def test_a_copied_model_and_its_original_together_earn_what_the_original_earns_alone(rule):
    silos, labels = random_silos(5, n_rows=200, seed=11)
    alone = contribution_values(silos, labels, rule=rule, n_classes=3)
    silos["9"] = [member.copy() for member in silos["3"]]
    with_copy = contribution_values(silos, labels, rule=rule, n_classes=3)
    assert with_copy["duplicates"] == [["3", "9"]]
    for measure in ("balanced_accuracy", "accuracy"):
        pair = [with_copy["silos"][silo]["shapley"][measure] for silo in ("3", "9")]
        assert pair[0] == pair[1] == pytest.approx(alone["silos"]["3"]["shapley"][measure] / 2)
        for silo in ("1", "2", "4", "5"):
            assert with_copy["silos"][silo]["shapley"][measure] == pytest.approx(
                alone["silos"][silo]["shapley"][measure]
            )


def test_rank_bands():
    assert [rank_band(rank, 8) for rank in range(1, 9)] == [
        "top quarter",
        "top quarter",
        "second quarter",
        "second quarter",
        "third quarter",
        "third quarter",
        "bottom quarter",
        "bottom quarter",
    ]
    assert rank_band(1, 1) == "top quarter"


@pytest.mark.parametrize("rule", ["vote", "average"])
def test_a_silo_uploading_a_constant_model_is_worth_at_most_nothing_on_adult(rule):
    data = load_adult(seed=0)
    parts = iid_partition(len(data.train_y), 4, seed=0)
    silos = {}
    for index, part in enumerate(parts):
        part = part[:2000]
        model = LogisticRegression(max_iter=300).fit(data.train_x[part], data.train_y[part])
        silos[str(index + 1)] = [model.predict_proba(data.test_x)]
    constant = np.zeros((len(data.test_y), 2))
    constant[:, 0] = 1.0  # always the majority class, '<=50K'
    silos["9"] = [constant]
    values = contribution_values(silos, data.test_y, rule=rule, n_classes=2)
    assert values["silos"]["9"]["shapley"]["balanced_accuracy"] <= 0
    assert values["silos"]["9"]["rank"] == 5
    assert all(values["silos"][str(i)]["shapley"]["balanced_accuracy"] > 0 for i in range(1, 5))


def test_the_cohort_rule_values_the_cohort_teacher_of_each_coalition():
    """v(S) read literally: CPFL's own teacher (workers.algorithms.cohort.cohort_teacher_logits) over S's cohorts."""
    from workers.algorithms.cohort import cohort_teacher_logits, log_probabilities

    silos, labels = random_silos(5, n_rows=80, seed=13)
    silos = {silo: members[:1] for silo, members in silos.items()}  # one cohort model per silo
    generator = np.random.default_rng(4)
    counts = {silo: [generator.integers(0, 40, 3).astype(float)] for silo in silos}
    counts["2"] = [np.array([30.0, 0.0, 5.0])]  # holds no example of class 1

    def teacher_accuracy(coalition):
        if not coalition:
            return 1 / 3  # the uniform guess
        members = sorted(coalition)
        teacher = cohort_teacher_logits(
            [log_probabilities(silos[m][0]) for m in members], [counts[m][0] for m in members]
        )
        correct = (teacher.argmax(axis=1) == labels).astype(float)
        return np.mean([correct[labels == c].mean() for c in np.unique(labels)])

    values = contribution_values(
        silos, labels, rule="cohort", n_classes=3, member_class_counts=counts
    )
    expected = brute_force_shapley(teacher_accuracy, list(silos))
    for silo, value in expected.items():
        assert values["silos"][silo]["shapley"]["balanced_accuracy"] == pytest.approx(
            value, abs=1e-12
        )
    with pytest.raises(ValueError, match="declared class counts"):
        contribution_values(silos, labels, rule="cohort", n_classes=3)
