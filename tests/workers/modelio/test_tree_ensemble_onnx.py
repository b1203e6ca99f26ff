"""The ONNX writer of decision trees and random forests: the same probabilities and classes as the fitted model on
its training rows and on rows exactly at, just above and just below every split threshold; the market's checks
accept its files; every other scikit-learn model still goes through skl2onnx."""

import numpy as np
import onnx
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from workers.modelio.artifact import exported_file
from workers.modelio.base import ArtifactFormat, ModelFormat, ModelLimits
from workers.modelio.native import predict_probabilities
from workers.modelio.tree_ensemble_onnx import (
    float32_thresholds,
    tree_ensemble_onnx,
    tree_ensemble_writable,
)
from workers.modelio.validate import inspect_model

FEATURES = np.random.default_rng(1).normal(size=(400, 5)).astype(np.float32)
LABELS = {
    "binary": (FEATURES[:, 0] + FEATURES[:, 1] > 0).astype(np.int64),
    "three classes": (FEATURES[:, 0] > 0).astype(np.int64) + (FEATURES[:, 2] > 0.5),
}
MODELS = {
    "decision tree": lambda: DecisionTreeClassifier(max_depth=6, random_state=0),
    "random forest": lambda: RandomForestClassifier(n_estimators=20, max_depth=8, random_state=0),
}


def onnx_outputs(data: bytes, features: np.ndarray):
    import onnxruntime

    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    labels, probabilities = session.run(["label", "probabilities"], {"features": features})
    return labels, probabilities


def threshold_rows(model, features: np.ndarray) -> np.ndarray:
    """For every split of every tree, a row of ``features`` with the split's feature set to the float32 at the
    threshold, the float32 just above and the one just below."""
    trees = [model] if isinstance(model, DecisionTreeClassifier) else model.estimators_
    rows = []
    for tree in trees:
        inner = tree.tree_.children_left != -1
        for feature, threshold in zip(
            tree.tree_.feature[inner], float32_thresholds(tree.tree_.threshold[inner])
        ):
            for value in (
                threshold,
                np.nextafter(threshold, np.float32(np.inf)),
                np.nextafter(threshold, np.float32(-np.inf)),
            ):
                row = features[len(rows) % len(features)].copy()
                row[feature] = value
                rows.append(row)
    return np.asarray(rows, dtype=np.float32)


def test_a_threshold_is_the_largest_float32_not_above_it():
    thresholds = np.array([0.1, 0.5, -0.1, 1.0 + 2.0**-30])
    assert float32_thresholds(thresholds).tolist() == [
        np.float32(0.099999994).item(),  # float32(0.1) is 0.100000001…, above 0.1
        0.5,  # exact in float32
        np.float32(-0.1).item(),  # float32(-0.1) is -0.100000001…, below -0.1
        1.0,
    ]
    assert float32_thresholds(thresholds).dtype == np.float32


@pytest.mark.parametrize("task", LABELS)
@pytest.mark.parametrize("kind", MODELS)
def test_the_onnx_file_predicts_the_fitted_models_classes_and_probabilities(kind, task):
    model = MODELS[kind]().fit(FEATURES, LABELS[task])
    data = tree_ensemble_onnx(model, FEATURES.shape[1])
    edges = threshold_rows(model, FEATURES)
    assert len(edges) >= 3 * 5
    for rows in (FEATURES, edges):
        labels, probabilities = onnx_outputs(data, rows)
        expected = model.predict_proba(rows)
        assert np.abs(probabilities - expected).max() < 1e-6
        # a tie between two classes (half the trees each) may be summed a float32 ulp apart by onnxruntime
        top_two = np.sort(expected, axis=1)[:, -2:]
        clear = top_two[:, 1] - top_two[:, 0] > 1e-6
        assert clear.mean() > 0.9
        assert labels[clear].tolist() == model.predict(rows)[clear].tolist()


def test_a_row_at_the_float32_next_to_a_midpoint_goes_the_way_scikit_learn_sends_it():
    # two adjacent float32 values (far enough apart for scikit-learn to split them, the smaller one's last mantissa
    # bit odd): the split is their float64 midpoint, which rounds to nearest (even) in float32, up to the larger
    below = np.nextafter(np.float32(1000.0), np.float32(2000.0))
    above = np.nextafter(below, np.float32(2000.0))
    features = np.array([[below], [above]] * 5, dtype=np.float32)
    labels = np.array([0, 1] * 5)
    tree = DecisionTreeClassifier(random_state=0).fit(features, labels)
    assert (
        np.float32(tree.tree_.threshold[0]) == above
    )  # rounding to nearest would put ``above`` on the left
    onnx_labels, _ = onnx_outputs(tree_ensemble_onnx(tree, 1), features)
    assert onnx_labels.tolist() == tree.predict(features).tolist() == labels.tolist()


@pytest.mark.parametrize("kind", MODELS)
def test_the_file_passes_the_markets_checks_and_reads_every_federation_class(kind):
    model = MODELS[kind]().fit(FEATURES, LABELS["three classes"])
    upload = exported_file(model, ArtifactFormat.ONNX, n_features=5)
    info = inspect_model(upload.data, n_features=5, n_classes=3, limits=ModelLimits())
    assert (info.format, info.classes) == (ModelFormat.ONNX, (0, 1, 2))
    assert onnx.load_from_string(upload.data).producer_name == "onefold"
    probabilities = predict_probabilities(upload.data, ModelFormat.ONNX, FEATURES, n_classes=3)
    assert np.abs(probabilities - model.predict_proba(FEATURES)).max() < 1e-6


def test_other_scikit_learn_models_and_text_classes_go_through_skl2onnx():
    linear = LogisticRegression().fit(FEATURES, LABELS["binary"])
    text_classes = DecisionTreeClassifier().fit(FEATURES, np.array(["no", "yes"])[LABELS["binary"]])
    assert not tree_ensemble_writable(linear) and not tree_ensemble_writable(text_classes)
    upload = exported_file(linear, ArtifactFormat.ONNX, n_features=5)
    assert onnx.load_from_string(upload.data).producer_name == "skl2onnx"
