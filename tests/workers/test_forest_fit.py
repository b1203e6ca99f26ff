"""The lean random-forest fit (workers.learners.forest) grows exactly scikit-learn's trees."""

import pickle
from concurrent.futures import ThreadPoolExecutor as ThreadPool

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from workers.learners.forest import fit_estimator, fit_forest, fit_tree, predict_probabilities


def _same_forest(
    expected: RandomForestClassifier, actual: RandomForestClassifier, features
) -> None:
    assert len(expected.estimators_) == len(actual.estimators_)
    for mine, theirs in zip(actual.estimators_, expected.estimators_):
        assert mine.random_state == theirs.random_state
        for name in (
            "feature",
            "threshold",
            "children_left",
            "children_right",
            "value",
            "n_node_samples",
        ):
            assert np.array_equal(getattr(mine.tree_, name), getattr(theirs.tree_, name)), name
        assert sorted(vars(mine)) == sorted(vars(theirs))
        assert (
            np.array_equal(mine.classes_, theirs.classes_) and mine.n_classes_ == theirs.n_classes_
        )
    assert sorted(vars(actual)) == sorted(vars(expected))
    assert np.array_equal(actual.classes_, expected.classes_)
    assert np.array_equal(actual.predict_proba(features), expected.predict_proba(features))


@pytest.mark.parametrize(
    "forest_settings",
    [
        {"n_estimators": 30, "max_depth": 6, "random_state": 7},
        {
            "n_estimators": 10,
            "max_depth": None,
            "criterion": "entropy",
            "max_features": 0.5,
            "min_samples_leaf": 3,
            "min_samples_split": 4,
            "random_state": 3,
        },
        {
            "n_estimators": 5,
            "max_features": None,
            "min_weight_fraction_leaf": 0.01,
            "random_state": 11,
        },
    ],
)
def test_lean_fit_grows_the_trees_scikit_learn_grows(forest_settings):
    features, labels = load_breast_cancer(return_X_y=True)
    expected = RandomForestClassifier(**forest_settings).fit(features, labels)
    actual = fit_forest(RandomForestClassifier(**forest_settings), features, labels)
    _same_forest(expected, actual, features)
    assert np.array_equal(
        pickle.loads(pickle.dumps(actual)).predict(features), expected.predict(features)
    )


@pytest.mark.parametrize("n_jobs", [2, -1])
def test_lean_fit_in_threads_grows_the_trees_one_thread_grows(n_jobs, monkeypatch):
    import workers.learners.forest as forest

    features, labels = load_breast_cancer(return_X_y=True)
    settings = {"n_estimators": 12, "max_depth": 6, "random_state": 5}
    expected = RandomForestClassifier(**settings).fit(features, labels)
    in_threads = []
    monkeypatch.setattr(
        forest,
        "ThreadPoolExecutor",
        lambda **kwargs: in_threads.append(kwargs) or ThreadPool(**kwargs),
    )
    actual = fit_estimator(RandomForestClassifier(n_jobs=n_jobs, **settings), features, labels)
    assert in_threads and in_threads[0]["max_workers"] > 1  # the lean path, in threads
    actual.n_jobs = expected.n_jobs  # the one setting that differs
    _same_forest(expected, actual, features)


def test_lean_fit_keeps_the_label_values_of_a_multiclass_target():
    features, labels = load_digits(return_X_y=True)
    labels = labels * 10 + 3  # classes 3, 13, …, 93: the forest reports them, its trees see 0..9
    forest_settings = {"n_estimators": 8, "max_depth": 5, "random_state": 0}
    actual = fit_estimator(RandomForestClassifier(**forest_settings), features, labels)
    _same_forest(RandomForestClassifier(**forest_settings).fit(features, labels), actual, features)
    assert set(actual.predict(features)) <= set(labels)


@pytest.mark.parametrize(
    "forest_settings",
    [
        {"class_weight": "balanced"},
        {"max_samples": 0.5},
        {"oob_score": True},
        {"max_leaf_nodes": 8},
    ],
)
def test_settings_the_lean_fit_does_not_cover_go_through_scikit_learn(forest_settings, monkeypatch):
    import workers.learners.forest as forest

    monkeypatch.setattr(
        forest, "fit_forest", lambda *arguments: pytest.fail("the lean fit was used")
    )
    features, labels = load_breast_cancer(return_X_y=True)
    model = fit_estimator(
        RandomForestClassifier(n_estimators=5, random_state=0, **forest_settings), features, labels
    )
    assert len(model.estimators_) == 5


def test_missing_values_go_through_scikit_learn(monkeypatch):
    import workers.learners.forest as forest

    monkeypatch.setattr(
        forest, "fit_forest", lambda *arguments: pytest.fail("the lean fit was used")
    )
    features, labels = load_breast_cancer(return_X_y=True)
    features = features.copy()
    features[::7, 2] = np.nan
    assert (
        len(
            fit_estimator(
                RandomForestClassifier(n_estimators=3, random_state=0), features, labels
            ).estimators_
        )
        == 3
    )


@pytest.mark.parametrize(
    "tree_settings",
    [
        {"max_depth": 6, "random_state": 0},
        {
            "max_depth": None,
            "criterion": "entropy",
            "max_features": "sqrt",
            "min_samples_leaf": 2,
            "random_state": 5,
        },
        {
            "max_depth": 3,
            "min_samples_split": 10,
            "min_weight_fraction_leaf": 0.02,
            "random_state": 9,
        },
    ],
)
def test_lean_tree_fit_grows_the_tree_scikit_learn_grows(tree_settings):
    features, labels = load_digits(return_X_y=True)
    rows = np.random.default_rng(0).choice(len(labels), 150, replace=False)  # a teacher's slice
    expected = DecisionTreeClassifier(**tree_settings).fit(features[rows], labels[rows])
    actual = fit_tree(DecisionTreeClassifier(**tree_settings), features[rows], labels[rows])
    assert sorted(vars(actual)) == sorted(vars(expected))
    assert (
        np.array_equal(actual.classes_, expected.classes_)
        and actual.classes_.dtype == expected.classes_.dtype
    )
    for name in (
        "feature",
        "threshold",
        "children_left",
        "children_right",
        "value",
        "n_node_samples",
    ):
        assert np.array_equal(getattr(actual.tree_, name), getattr(expected.tree_, name)), name
    assert np.array_equal(actual.predict_proba(features), expected.predict_proba(features))


def test_trees_the_lean_fit_does_not_cover_go_through_scikit_learn(monkeypatch):
    import workers.learners.forest as forest

    monkeypatch.setattr(forest, "fit_tree", lambda *arguments: pytest.fail("the lean fit was used"))
    features, labels = load_breast_cancer(return_X_y=True)
    for settings in ({"splitter": "random"}, {"class_weight": "balanced"}, {"max_leaf_nodes": 5}):
        assert (
            fit_estimator(
                DecisionTreeClassifier(random_state=0, **settings), features, labels
            ).tree_.node_count
            > 1
        )


def test_default_teachers_and_students_take_the_lean_fits(monkeypatch):
    import workers.learners.forest as forest
    from workers.learners import fit_aligned

    used = []
    lean_tree, lean_forest = forest.fit_tree, forest.fit_forest
    monkeypatch.setattr(
        forest, "fit_tree", lambda *arguments: used.append("fit_tree") or lean_tree(*arguments)
    )
    monkeypatch.setattr(
        forest,
        "fit_forest",
        lambda *arguments: used.append("fit_forest") or lean_forest(*arguments),
    )
    features, labels = load_breast_cancer(return_X_y=True)
    fit_aligned({"family": "decision_tree", "max_depth": 6}, features, labels, n_classes=2, seed=0)
    fit_aligned(
        {"family": "random_forest", "n_estimators": 5, "max_depth": 6},
        features,
        labels,
        n_classes=2,
        seed=0,
    )
    assert used == ["fit_tree", "fit_forest"]


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_forest_probabilities_are_scikit_learns_to_the_last_bit(n_jobs):
    features, labels = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=3, n_jobs=n_jobs)
    forest.fit(features[:1000], labels[:1000] + 10)  # class values that are not column indices

    expected = forest.set_params(n_jobs=None).predict_proba(features[1000:])
    assert np.array_equal(predict_probabilities(forest, features[1000:]), expected)
    with pytest.raises(ValueError, match="features"):
        predict_probabilities(forest, features[1000:, :10])
    tree = DecisionTreeClassifier(max_depth=3).fit(features, labels)
    assert np.array_equal(predict_probabilities(tree, features), tree.predict_proba(features))
