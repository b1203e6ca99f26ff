import numpy as np
import pytest
from sklearn.datasets import load_digits

from workers.algorithms.cohort import (
    cohort_class_weights,
    cohort_teacher_logits,
    label_counts_of,
    log_probabilities,
)
from workers.algorithms.registry import Member, algorithm_get
from workers.partition import dirichlet_label_partition
from workers.reproduce.cohort_simulation import CohortSetting, simulate_cpfl

# 3 cohorts × 3 classes; class 2 is held by nobody
COUNTS = np.array([[30, 0, 0], [10, 20, 0], [60, 20, 0]])


def test_cohort_class_weights_are_each_cohorts_share_of_the_class():
    assert cohort_class_weights(COUNTS).tolist() == [
        [0.3, 0.0, 0.0],
        [0.1, 0.5, 0.0],
        [0.6, 0.5, 0.0],
    ]


def test_teacher_logits_weight_each_class_by_the_cohorts_shares():
    logits = np.array([[[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0]]])  # (K=3, n=1, C=3)
    teacher = cohort_teacher_logits(logits, COUNTS)
    assert teacher[0, 0] == pytest.approx(0.3 * 1 + 0.1 * 4 + 0.6 * 7)
    assert teacher[0, 1] == pytest.approx(0.5 * 5 + 0.5 * 8)
    assert teacher[0, 2] == pytest.approx(np.log(1e-8))  # nobody holds class 2


def test_label_shares_are_scaled_to_counts():
    assert label_counts_of([0.25, 0.75], 40).tolist() == [10.0, 30.0]
    assert label_counts_of([2, 6], 40).tolist() == [10.0, 30.0]


def test_cpfl_signals_fuse_to_the_weighted_teacher():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3), size=(3, 12))  # (K, n, C)
    members = [
        Member(
            key=str(k),
            organisation=str(k),
            n_examples=int(COUNTS[k].sum()),
            validation_score=0.0,
            label_distribution=tuple(COUNTS[k] / COUNTS[k].sum()),
        )
        for k in range(3)
    ]
    cpfl = algorithm_get("cpfl")
    params = {"student": {"family": "mlp", "hidden_sizes": [8], "epochs": 2}}
    assert cpfl.select(members, params, seed=0) == [0, 1, 2]
    signals = [
        cpfl.member_signal(probabilities[k][None], member=members[k], n_classes=3, params=params)
        for k in range(3)
    ]
    fusion = cpfl.fuse(
        np.sum(signals, axis=0),
        rng.normal(size=(12, 4)),
        members=members,
        n_classes=3,
        params=params,
        seed=0,
    )
    expected = cohort_teacher_logits(log_probabilities(probabilities), COUNTS)
    assert fusion.labels.tolist() == expected.argmax(axis=1).tolist()
    assert fusion.details["classes_without_cohort"] == [2] and fusion.trained.all()
    assert fusion.model.predict_proba(np.zeros((2, 4))).shape == (2, 3)


def test_cpfl_refuses_cohorts_without_a_label_distribution():
    with pytest.raises(ValueError, match="label distribution"):
        algorithm_get("cpfl").select([Member("a", "o", 10, 0.5)], {}, seed=0)


def test_cpfl_refuses_a_tree_student():
    with pytest.raises(
        ValueError, match="'student' must be a mapping with a 'family' of mlp, cnn, not"
    ):
        algorithm_get("cpfl").validate({"student": {"family": "random_forest"}})


def test_cpfl_simulator_runs_cohorts_to_patience_and_distils():
    features, labels = load_digits(return_X_y=True)
    features = (features / 16.0).astype(np.float32)
    train, public, test = np.split(np.random.default_rng(0).permutation(len(labels)), [1200, 1500])
    clients = [
        train[part]
        for part in dirichlet_label_partition(labels[train], 20, beta=1.0, seed=0, min_size=20)
    ]
    setting = CohortSetting(
        hidden_sizes=(32,),
        local_steps=5,
        max_rounds=15,
        patience=2,
        learning_rate=0.1,
        student={"family": "mlp", "hidden_sizes": [32], "epochs": 20, "batch_size": 32},
        loss="kl",
    )
    result = simulate_cpfl(
        features,
        labels,
        clients,
        features[public],
        features[test],
        labels[test],
        n_cohorts=4,
        n_classes=10,
        setting=setting,
        seed=0,
    )
    assert (
        len(result["rounds"]) == 4
        and result["rounds_to_convergence"] == max(result["rounds"]) <= 15
    )
    assert all(best <= run for best, run in zip(result["best_rounds"], result["rounds"]))
    assert result["client_steps"] <= 15 * 5 * 20 and result["client_steps"] % 5 == 0
    assert result["teacher"] > 0.5 and result["student"] > 0.4
