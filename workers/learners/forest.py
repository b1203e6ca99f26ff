"""A lean fit for scikit-learn's random forests: the same trees, without the per-tree Python overhead.

``RandomForestClassifier.fit`` spends about half of its time on a 6,000-row, depth-6, 100-tree
forest (FedKT's default student) outside the Cython tree builder: per tree it clones and
re-parameterises an estimator through ``inspect`` (``get_params``/``set_params``), re-checks the
targets (``np.unique``), re-validates the sample weights and goes through joblib's dispatch
(profile of a whole FedKT run, ``benchmarks/engine.md``). :func:`fit_estimator` does the input
checks once per forest and calls the same Cython builder per tree with the same random draws, so
the fitted forest is a genuine ``RandomForestClassifier`` whose trees are node for node those of
``forest.fit(X, y)`` (``tests/workers/test_forest_fit.py``), exported and predicted as before.

Only the settings FedKT's learners use take the lean path (bootstrap without ``max_samples``, no
class weights, no out-of-bag score, no warm start, no leaf-count limit, no monotonic constraints,
no pruning, finite dense data; ``n_jobs`` threads grow the trees); anything else goes through scikit-learn's own ``fit``.
Single ``DecisionTreeClassifier`` teachers take the same lean path (:func:`fit_tree`), and a fitted forest's
probabilities skip joblib's dispatch per tree (:func:`predict_probabilities`).
"""

from __future__ import annotations

import numbers
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from joblib import effective_n_jobs
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.tree._classes import CRITERIA_CLF, DENSE_SPLITTERS
from sklearn.tree._tree import DepthFirstTreeBuilder, Tree
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets

_MAX_INT = np.iinfo(np.int32).max
_this_thread = threading.local()


def _random_state(seed) -> np.random.RandomState:
    """``check_random_state(seed)``; for an integer seed this thread's generator reseeded, which gives the same
    draws as ``np.random.RandomState(seed)`` in about 1 µs instead of 70 (a new one first seeds itself from the
    operating system's entropy). It holds the GIL, twice per tree: an eighth of a student tree's time.
    Use it before asking this function again on the same thread."""
    if not isinstance(seed, numbers.Integral):
        return check_random_state(seed)
    random = getattr(_this_thread, "random_state", None)
    if random is None:
        random = _this_thread.random_state = np.random.RandomState()
    random.seed(int(seed))
    return random


def fit_estimator(estimator, features, labels):
    """``estimator.fit(features, labels)``, through :func:`fit_forest` or :func:`fit_tree` where they
    apply; returns the estimator."""
    if type(estimator) is RandomForestClassifier and _lean_forest_applies(estimator, features):
        return fit_forest(estimator, features, labels)
    if type(estimator) is DecisionTreeClassifier and _lean_tree_applies(estimator, features):
        return fit_tree(estimator, features, labels)
    return estimator.fit(features, labels)


def _lean_tree_applies(tree: DecisionTreeClassifier, features) -> bool:
    settings = vars(tree)  # the constructor parameters are attributes; get_params costs an inspect
    return (
        isinstance(features, np.ndarray)
        and features.ndim == 2
        and features.dtype.kind in "fiub"
        and settings["splitter"] == "best"
        and settings["class_weight"] is None
        and settings["max_leaf_nodes"] is None
        and settings["monotonic_cst"] is None
        and settings["ccp_alpha"] == 0.0
        and settings["criterion"] in CRITERIA_CLF
        and isinstance(settings["min_samples_leaf"], numbers.Integral)
        and isinstance(settings["min_samples_split"], numbers.Integral)
        and bool(np.isfinite(features).all())
    )


def fit_tree(tree: DecisionTreeClassifier, features, labels) -> DecisionTreeClassifier:
    """Fit ``tree`` as ``tree.fit(features, labels)`` would (same nodes, same attributes) without
    scikit-learn's per-call validation: FedKT fits hundreds of teachers on slices of a few hundred
    rows, where that validation costs more than the tree. The caller ensures :func:`_lean_tree_applies`."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != len(features) or len(labels) == 0:
        raise ValueError(
            f"Expected {len(features)} labels in a 1-D array, got shape {labels.shape}."
        )
    check_classification_targets(labels)
    classes, encoded = np.unique(labels, return_inverse=True)
    n_samples, n_features = features.shape
    targets = np.ascontiguousarray(encoded.reshape(-1, 1), dtype=np.float64)
    n_classes = np.array([len(classes)], dtype=np.intp)
    max_features = _max_features(tree.max_features, n_features)
    min_weight_leaf = tree.min_weight_fraction_leaf * n_samples
    splitter = DENSE_SPLITTERS["best"](
        CRITERIA_CLF[tree.criterion](1, n_classes),
        max_features,
        tree.min_samples_leaf,
        min_weight_leaf,
        _random_state(tree.random_state),
        None,
    )
    tree.tree_ = Tree(n_features, n_classes, 1)
    DepthFirstTreeBuilder(
        splitter,
        max(tree.min_samples_split, 2 * tree.min_samples_leaf),
        tree.min_samples_leaf,
        min_weight_leaf,
        _MAX_INT if tree.max_depth is None else tree.max_depth,
        tree.min_impurity_decrease,
    ).build(tree.tree_, features, targets, None, None)
    tree.n_features_in_, tree.n_outputs_, tree.max_features_ = n_features, 1, max_features
    tree.classes_, tree.n_classes_ = classes, len(classes)
    return tree


def _lean_forest_applies(forest: RandomForestClassifier, features) -> bool:
    if (
        not isinstance(features, np.ndarray)
        or features.ndim != 2
        or features.dtype.kind not in "fiub"
    ):
        return False
    settings = vars(
        forest
    )  # the constructor parameters are attributes; get_params costs an inspect
    return (
        bool(settings["bootstrap"])
        and settings["max_samples"] is None
        and settings["class_weight"] is None
        and not settings["oob_score"]
        and not settings["warm_start"]
        and settings["max_leaf_nodes"] is None
        and settings["monotonic_cst"] is None
        and settings["ccp_alpha"] == 0.0
        and settings["criterion"] in CRITERIA_CLF
        and isinstance(settings["min_samples_leaf"], numbers.Integral)
        and isinstance(settings["min_samples_split"], numbers.Integral)
        and bool(np.isfinite(features).all())
    )


def _max_features(setting, n_features: int) -> int:
    """scikit-learn's reading of ``max_features`` (``BaseDecisionTree._fit``)."""
    if setting == "sqrt":
        return max(1, int(np.sqrt(n_features)))
    if setting == "log2":
        return max(1, int(np.log2(n_features)))
    if setting is None:
        return n_features
    if isinstance(setting, numbers.Integral):
        return int(setting)
    return max(1, int(setting * n_features)) if setting > 0.0 else 0


def fit_forest(forest: RandomForestClassifier, features, labels) -> RandomForestClassifier:
    """Fit ``forest`` as ``forest.fit(features, labels)`` would (same trees, same attributes), checking
    the data once rather than once per tree. The caller ensures :func:`_lean_forest_applies`."""
    features = np.ascontiguousarray(features, dtype=np.float32)
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != len(features) or len(labels) == 0:
        raise ValueError(
            f"Expected {len(features)} labels in a 1-D array, got shape {labels.shape}."
        )
    check_classification_targets(labels)
    classes, encoded = np.unique(labels, return_inverse=True)
    n_samples, n_features = features.shape
    targets = np.ascontiguousarray(encoded.reshape(-1, 1), dtype=np.float64)
    tree_classes = np.arange(
        len(classes), dtype=np.float64
    )  # what each tree sees: the encoded labels
    n_classes = np.array([len(classes)], dtype=np.intp)

    forest.n_features_in_ = n_features
    forest._n_samples, forest.n_outputs_ = n_samples, 1
    forest._sample_weight, forest._n_samples_bootstrap = None, n_samples
    forest._validate_estimator()
    tree_settings = {name: getattr(forest, name) for name in forest.estimator_params}
    max_features = _max_features(forest.max_features, n_features)
    min_samples_leaf = forest.min_samples_leaf
    min_samples_split = max(forest.min_samples_split, 2 * min_samples_leaf)
    max_depth = _MAX_INT if forest.max_depth is None else forest.max_depth
    forest_random = check_random_state(forest.random_state)

    # the trees' seeds are drawn in order first, so that threads grow the very trees one thread would
    seeds = [forest_random.randint(_MAX_INT) for _ in range(forest.n_estimators)]

    def grown(seed: int) -> DecisionTreeClassifier:
        tree = DecisionTreeClassifier(**{**tree_settings, "random_state": seed})
        # the bootstrap draw and the splitter each start from the tree's seed, as in scikit-learn
        sample_indices = _random_state(seed).randint(0, n_samples, n_samples).astype(np.int32)
        sample_weight = np.bincount(sample_indices, minlength=n_samples).astype(np.float64)
        min_weight_leaf = forest.min_weight_fraction_leaf * sample_weight.sum()
        criterion = CRITERIA_CLF[forest.criterion](1, n_classes)
        splitter = DENSE_SPLITTERS["best"](
            criterion,
            max_features,
            min_samples_leaf,
            min_weight_leaf,
            _random_state(seed),  # drawn from once, when the builder starts
            None,
        )
        tree.tree_ = Tree(n_features, n_classes, 1)
        DepthFirstTreeBuilder(
            splitter,
            min_samples_split,
            min_samples_leaf,
            min_weight_leaf,
            max_depth,
            forest.min_impurity_decrease,
        ).build(tree.tree_, features, targets, sample_weight, None)
        tree.n_features_in_, tree.n_outputs_, tree.max_features_ = n_features, 1, max_features
        tree.classes_, tree.n_classes_ = tree_classes, len(classes)
        return tree

    threads = min(effective_n_jobs(forest.n_jobs), len(seeds))
    if threads > 1:  # the Cython builder releases the GIL
        with ThreadPoolExecutor(max_workers=threads) as pool:
            trees = list(pool.map(grown, seeds))
    else:
        trees = [grown(seed) for seed in seeds]
    forest.estimators_ = trees
    forest.classes_, forest.n_classes_ = classes, len(classes)
    return forest


def predict_probabilities(estimator, features) -> np.ndarray:
    """``estimator.predict_proba(features)``; for a single-output random forest, its trees' probabilities
    summed in scikit-learn's order without joblib's dispatch and configuration per tree (a third of the time of
    the server's predictions of FedKT's students), so the same numbers."""
    if type(estimator) is not RandomForestClassifier or estimator.n_outputs_ != 1:
        return estimator.predict_proba(features)
    features = estimator._validate_X_predict(features)  # once, not once per tree
    probabilities = np.zeros((features.shape[0], estimator.n_classes_))
    for tree in estimator.estimators_:
        probabilities += tree.tree_.predict(features)[:, : estimator.n_classes_]
    probabilities /= len(estimator.estimators_)
    return probabilities
