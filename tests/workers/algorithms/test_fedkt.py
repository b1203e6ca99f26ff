import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

from workers.algorithms.fedkt import (
    FedKTConfig,
    fedkt_fit,
    party_fit,
    predict_classes,
    select_queries,
    server_fit,
    train_teachers,
)
from workers.partition import dirichlet_label_partition

FOREST_CONFIG = FedKTConfig(
    teacher={"family": "random_forest", "n_estimators": 20, "max_depth": 4},
    student={"family": "random_forest", "n_estimators": 20, "max_depth": 6},
    final={"family": "random_forest", "n_estimators": 50},
)


def _federation(loader, n_parties, *, scale=1.0):
    features, labels = loader(return_X_y=True)
    features = features / scale
    train_x, rest_x, train_y, rest_y = train_test_split(
        features, labels, test_size=0.4, random_state=0, stratify=labels
    )
    public_x, test_x, _, test_y = train_test_split(
        rest_x, rest_y, test_size=0.5, random_state=0, stratify=rest_y
    )
    parts = dirichlet_label_partition(train_y, n_parties, beta=0.5, seed=0, min_size=20)
    return [(train_x[part], train_y[part]) for part in parts], public_x, test_x, test_y


@pytest.fixture(scope="module")
def breast_cancer():
    return _federation(load_breast_cancer, 4)


@pytest.fixture(scope="module")
def digits():
    return _federation(load_digits, 3, scale=16.0)


class ShiftNoise:
    """A deterministic stand-in for a DP mechanism: subtracts a fixed amount from every count."""

    name = "shift"

    def __init__(self, shift):
        self.shift = shift

    def noisy_counts(self, counts):
        return np.asarray(counts) - self.shift


def test_fedkt_l0_on_breast_cancer_beats_the_floor_and_is_reproducible(breast_cancer):
    parties, public_x, test_x, test_y = breast_cancer
    first = fedkt_fit(parties, public_x, n_classes=2, config=FOREST_CONFIG, seed=7)
    second = fedkt_fit(parties, public_x, n_classes=2, config=FOREST_CONFIG, seed=7)
    predictions = first.final_model.predict(test_x)
    assert first.level == "L0" and first.privacy is None
    assert (predictions == test_y).mean() >= 0.9
    assert np.array_equal(predictions, second.final_model.predict(test_x))
    assert set(first.stages) >= {
        "teachers",
        "party_votes",
        "students",
        "server_votes",
        "final_model",
    }


def test_fedkt_l0_on_digits_with_torch_mlps_and_mixed_families(digits):
    parties, public_x, test_x, test_y = digits
    config = FedKTConfig(
        teacher={"family": "random_forest", "n_estimators": 30},
        student="logistic_regression",
        final={"family": "mlp", "hidden_sizes": [64], "epochs": 60, "batch_size": 32},
    )
    first = fedkt_fit(parties, public_x, n_classes=10, config=config, seed=3)
    second = fedkt_fit(parties, public_x, n_classes=10, config=config, seed=3)
    predictions = first.final_model.predict(test_x)
    assert (predictions == test_y).mean() >= 0.7
    assert np.array_equal(predictions, second.final_model.predict(test_x))


def test_tree_parties_in_threads_give_the_same_run_as_one_after_the_other(
    breast_cancer, monkeypatch
):
    import workers.algorithms.fedkt as fedkt

    parties, public_x, test_x, _ = breast_cancer
    serial = fedkt_fit(parties, public_x, n_classes=2, config=FOREST_CONFIG, seed=1, n_jobs=1)
    monkeypatch.setattr(fedkt, "ProcessPoolExecutor", None)  # trees must not start worker processes
    parallel = fedkt_fit(parties, public_x, n_classes=2, config=FOREST_CONFIG, seed=1, n_jobs=2)
    assert np.array_equal(
        serial.final_model.predict_proba(test_x), parallel.final_model.predict_proba(test_x)
    )
    assert np.array_equal(serial.server.consistent_counts, parallel.server.consistent_counts)
    for mine, theirs in zip(serial.parties, parallel.parties):
        for student, other in zip(mine.students, theirs.students):
            assert np.array_equal(student.predict_proba(public_x), other.predict_proba(public_x))
    predictions = fedkt.predict_students(serial.parties, public_x, n_jobs=1)
    assert np.array_equal(predictions, fedkt.predict_students(parallel.parties, public_x, n_jobs=2))


def test_other_learners_in_worker_processes_give_the_same_model_as_in_process(breast_cancer):
    parties, public_x, test_x, _ = breast_cancer
    config = FedKTConfig(
        teacher="logistic_regression", student="logistic_regression", final="logistic_regression"
    )
    serial = fedkt_fit(parties, public_x, n_classes=2, config=config, seed=1, n_jobs=1)
    parallel = fedkt_fit(parties, public_x, n_classes=2, config=config, seed=1, n_jobs=2)
    assert np.array_equal(serial.final_model.predict(test_x), parallel.final_model.predict(test_x))


def test_party_fit_trains_s_students_and_keeps_noiseless_counts_per_partition(breast_cancer):
    (features, labels), public_x = breast_cancer[0][0], breast_cancer[1]
    result = party_fit(
        features,
        labels,
        public_x,
        n_classes=2,
        teacher="logistic_regression",
        student="logistic_regression",
        partitions=3,
        teachers=4,
        query=0.5,
        seed=0,
    )
    assert len(result.students) == 3 and len(result.vote_counts) == 3
    assert len(result.queried_indices) == int(np.ceil(0.5 * len(public_x)))
    for counts in result.vote_counts:
        assert counts.shape == (len(result.queried_indices), 2)
        assert (counts.sum(axis=1) == 4).all()


class RecordingClassifier(ClassifierMixin, BaseEstimator):
    """Remembers the examples it was fitted on (their single feature is their index)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.seen_ = np.asarray(X)[:, 0].astype(int)
        return self

    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), 1.0 / len(self.classes_))


def test_teachers_are_trained_on_disjoint_subsets_that_cover_the_party():
    features = np.arange(40, dtype=float).reshape(-1, 1)
    labels = np.arange(40) % 2
    teachers = train_teachers(
        features,
        labels,
        n_classes=2,
        learner=RecordingClassifier(),
        partitions=2,
        teachers=4,
        seed=0,
    )
    assert len(teachers) == 2
    subsets = [[teacher.estimator_.seen_ for teacher in partition] for partition in teachers]
    for partition in subsets:
        assert len(partition) == 4
        assert np.array_equal(np.sort(np.concatenate(partition)), np.arange(40))
    assert not np.array_equal(subsets[0][0], subsets[1][0])  # each partition shuffles afresh


def test_server_fit_does_not_train_on_abstentions():
    public_x = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])
    # 2 parties, s = 2: only examples 0, 1 (class 0) and 4, 5 (class 1) get consistent votes
    predictions = np.array(
        [[[0, 0, 0, 1, 1, 1], [0, 0, 1, 0, 1, 1]], [[0, 0, 1, 0, 1, 1], [0, 0, 0, 1, 1, 1]]]
    )
    result = server_fit(predictions, public_x, n_classes=2, final="logistic_regression", seed=0)
    assert result.consistent_counts.tolist() == [[4, 0], [4, 0], [0, 0], [0, 0], [0, 4], [0, 4]]
    assert result.abstained.tolist() == [False, False, True, True, False, False]
    assert result.trained.tolist() == [True, True, False, False, True, True]
    assert result.noisy_counts is None


def test_server_noise_is_applied_to_the_consistent_counts_and_abstention_follows_the_noisy_counts():
    public_x = np.arange(4, dtype=float).reshape(-1, 1)
    predictions = np.array([[[0, 0, 1, 1], [0, 0, 1, 1]], [[0, 1, 1, 1], [0, 0, 1, 1]]])
    result = server_fit(
        predictions, public_x, n_classes=2, final="logistic_regression", noise=ShiftNoise(3), seed=0
    )
    assert result.consistent_counts.tolist() == [[4, 0], [2, 0], [0, 4], [0, 4]]
    assert result.noisy_counts.tolist() == [[1, -3], [-1, -3], [-3, 1], [-3, 1]]
    assert result.trained.tolist() == [True, False, True, True]


def test_server_fit_refuses_when_every_example_abstains():
    predictions = np.array([[[0, 1], [1, 0]]])
    with pytest.raises(ValueError, match="Every queried example abstained"):
        server_fit(predictions, np.zeros((2, 1)), n_classes=2, final="logistic_regression", seed=0)


def test_select_queries_takes_a_count_or_a_fraction_reproducibly():
    assert select_queries(10, 1.0, seed=0).tolist() == list(range(10))
    assert len(select_queries(200, 0.005, seed=0)) == 1
    assert np.array_equal(select_queries(100, 7, seed=4), select_queries(100, 7, seed=4))
    with pytest.raises(ValueError, match="Cannot query 11 of 10"):
        select_queries(10, 11, seed=0)


def test_predict_classes_stacks_each_models_predictions(breast_cancer):
    parties, public_x, *_ = breast_cancer
    result = party_fit(
        *parties[0],
        public_x,
        n_classes=2,
        teacher="logistic_regression",
        student="logistic_regression",
        partitions=2,
        teachers=2,
        seed=0,
    )
    assert predict_classes(result.students, public_x).shape == (2, len(public_x))


def test_fedkt_refuses_noise_at_both_levels(breast_cancer):
    parties, public_x, *_ = breast_cancer
    with pytest.raises(ValueError, match="not both"):
        fedkt_fit(
            parties,
            public_x,
            n_classes=2,
            config=FOREST_CONFIG,
            seed=0,
            party_noise=ShiftNoise(0),
            server_noise=ShiftNoise(0),
        )


def test_fedkt_l1_adds_server_noise_and_reports_party_level_privacy(breast_cancer):
    from workers.privacy.mechanisms import LaplaceNoise

    parties, public_x, test_x, test_y = breast_cancer
    config = FedKTConfig(**{**FOREST_CONFIG.__dict__, "server_query": 20})
    result = fedkt_fit(
        parties, public_x, n_classes=2, config=config, seed=0, server_noise=LaplaceNoise(gamma=0.5)
    )
    report = result.privacy.data_independent
    assert result.level == "L1" and result.server.noisy_counts is not None
    assert (report.unit, report.n_queries, report.partitions, report.teachers) == (
        "party-level",
        20,
        2,
        5,
    )
    assert result.privacy.data_dependent.epsilon <= report.epsilon
    assert result.final_model.predict(test_x).shape == test_y.shape


def test_fedkt_l2_adds_party_noise_and_reports_example_level_privacy(breast_cancer):
    from workers.privacy.mechanisms import LaplaceNoise

    parties, public_x, *_ = breast_cancer
    config = FedKTConfig(**{**FOREST_CONFIG.__dict__, "party_query": 30})
    result = fedkt_fit(
        parties, public_x, n_classes=2, config=config, seed=0, party_noise=LaplaceNoise(gamma=0.5)
    )
    report = result.privacy.data_independent
    assert result.level == "L2" and result.server.noisy_counts is None
    assert (report.unit, report.n_queries) == ("example-level", 60)  # 30 queries × s = 2 partitions
    assert result.privacy.data_dependent.epsilon <= report.epsilon


def test_secure_noise_differs_between_calls_while_the_noiseless_counts_do_not():
    from workers.privacy.mechanisms import LaplaceNoise

    predictions = np.zeros((50, 2, 200), dtype=np.int64)
    public_x = np.arange(200, dtype=float).reshape(-1, 1)
    predictions[:, :, 100:] = 1
    first, second = (
        server_fit(
            predictions,
            public_x,
            n_classes=2,
            final="logistic_regression",
            noise=LaplaceNoise(gamma=0.1),
            seed=0,
        )
        for _ in range(2)
    )
    assert np.array_equal(first.consistent_counts, second.consistent_counts)
    assert not np.array_equal(first.noisy_counts, second.noisy_counts)
