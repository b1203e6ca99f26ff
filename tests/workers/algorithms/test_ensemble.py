import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from workers.algorithms.bundle import BundleClassifier
from workers.algorithms.ensemble import (
    EnsembleClassifier,
    average_probabilities,
    member_probabilities,
    stacked_probabilities,
)
from workers.modelio import ModelLimits, SandboxConfiguration, SandboxLimits
from workers.modelio.bundle import BundleMember, bundle_read, bundle_write


class FixedProbabilities(ClassifierMixin, BaseEstimator):
    """A member whose probabilities are given by hand (classes_ may be a subset)."""

    def __init__(self, rows=None, classes=None):
        self.rows, self.classes = rows, classes
        self.classes_ = np.asarray(classes)

    def predict_proba(self, X):
        return np.asarray(self.rows, dtype=float)[
            np.asarray(X)[:, 0].astype(int)
        ]  # X holds row numbers


class VotesOnly:
    """A member with no probabilities: only hard predictions."""

    def predict(self, X):
        return np.array([2, 0])[np.asarray(X)[:, 0].astype(int)]


MEMBERS = [
    FixedProbabilities([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]], [0, 1, 2]),
    FixedProbabilities([[0.5, 0.5], [0.9, 0.1]], [0, 2]),  # never saw class 1
    VotesOnly(),
]
X = np.array([[0.0], [1.0]])


def test_members_that_saw_some_classes_get_zero_for_the_others():
    assert member_probabilities(MEMBERS[1], X, 3).tolist() == [[0.5, 0.0, 0.5], [0.9, 0.0, 0.1]]


def test_members_without_probabilities_cast_hard_votes():
    assert member_probabilities(MEMBERS[2], X, 3).tolist() == [[0, 0, 1], [1, 0, 0]]


def test_ensemble_probabilities_equal_the_hand_computed_average():
    ensemble = EnsembleClassifier(MEMBERS, n_classes=3).fit(X)
    expected = np.array(
        [
            [(0.6 + 0.5 + 0) / 3, 0.3 / 3, (0.1 + 0.5 + 1) / 3],
            [(0.2 + 0.9 + 1) / 3, 0.2 / 3, (0.6 + 0.1 + 0) / 3],
        ]
    )
    assert ensemble.predict_proba(X) == pytest.approx(expected)
    assert ensemble.predict(X).tolist() == [2, 0]


def test_weighted_average_and_subsets_reuse_one_stack():
    stacked = stacked_probabilities(MEMBERS, X, 3, batch_rows=1)
    assert average_probabilities(stacked, [0, 2]) == pytest.approx(
        np.array([[0.3, 0.15, 0.55], [0.6, 0.1, 0.3]])
    )
    assert average_probabilities(stacked, weights=[1, 0, 3]) == pytest.approx(
        np.array([[0.15, 0.075, 0.775], [0.8, 0.05, 0.15]])
    )


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        EnsembleClassifier(MEMBERS, n_classes=3, weights=[1, -1, 1]).fit(X)


def test_an_ensemble_saved_as_a_bundle_predicts_the_same_in_the_sandbox():
    features, labels = load_iris(return_X_y=True)
    features = features.astype(np.float32)
    first = LogisticRegression(max_iter=500).fit(features[::2], labels[::2])
    second = LogisticRegression(max_iter=500, C=0.1).fit(features[1::2], labels[1::2])
    ensemble = EnsembleClassifier([first, second], n_classes=3, weights=[2, 1]).fit(features)
    data = ensemble.to_bundle()
    manifest, members = bundle_read(data)
    assert [m["format"] for m in manifest["members"]] == ["onnx", "onnx"]
    assert [(member.format, member.weight) for member in members] == [("onnx", 2.0), ("onnx", 1.0)]
    assert [m["weight"] for m in manifest["members"]] == [2.0, 1.0] and manifest["n_features"] == 4
    restored = BundleClassifier(data).fit()
    assert restored.predict_proba(features[:20]) == pytest.approx(
        ensemble.predict_proba(features[:20]), abs=1e-4
    )


def test_a_bundle_runs_its_members_under_the_sandbox_configuration_it_is_given():
    features, labels = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(features, labels)
    data = EnsembleClassifier([model], n_classes=3).fit(features).to_bundle()
    rows = features[:5].astype(np.float32)
    assert BundleClassifier(data).fit().predict_proba(rows) == pytest.approx(
        model.predict_proba(rows), abs=1e-4
    )
    no_time = SandboxConfiguration(limits=SandboxLimits(wall_seconds=0))
    with pytest.raises(ValueError, match="did not finish predicting within 0 seconds"):
        BundleClassifier(data, sandbox=no_time).fit().predict_proba(rows)
    one_node = SandboxConfiguration(model_limits=ModelLimits(max_onnx_nodes=1))
    with pytest.raises(ValueError, match="nodes; the limit is 1"):
        BundleClassifier(data, sandbox=one_node).fit().predict_proba(rows)


@pytest.mark.parametrize(
    "manifest, message",
    [
        (
            {
                "n_classes": 2,
                "n_features": 3,
                "members": [{"file": "missing.onnx", "format": "onnx", "weight": 1}],
            },
            "does not hold",
        ),
        (
            {
                "n_classes": 2,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "pickle", "weight": 1}],
            },
            "format 'pickle'",
        ),
        (
            {
                "n_classes": 2,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "onnx", "weight": 0}],
            },
            "all zero",
        ),
        (
            {
                "n_classes": 0,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "onnx", "weight": 1}],
            },
            "n_classes",
        ),
        (
            {
                "n_classes": 3,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "onnx", "weight": 1, "classes": [0, 3]}],
            },
            re.escape(
                "Member a.onnx has classes [0, 3]; they must be distinct class indices 0 to 2."
            ),
        ),
        (
            {
                "n_classes": 3,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "onnx", "weight": 1, "classes": [1, 1]}],
            },
            "distinct class indices",
        ),
        (
            {
                "n_classes": 3,
                "n_features": 3,
                "members": [{"file": "a.onnx", "format": "onnx", "weight": 1, "classes": "0,1"}],
            },
            "distinct class indices",
        ),
    ],
)
def test_bundle_read_refuses_bad_manifests(manifest, message):
    import io
    import json
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("a.onnx", b"x")
    with pytest.raises(ValueError, match=message):
        bundle_read(buffer.getvalue())


def test_a_bundle_holding_every_upload_format_is_read_back():
    members = [
        BundleMember(model_format, b"x", 1)
        for model_format in ("onnx", "xgboost-json", "xgboost-ubjson", "safetensors")
    ]
    manifest, read = bundle_read(bundle_write(members, n_classes=2, n_features=5))
    assert read == [BundleMember(member.format, b"x", 1.0, "one_hot") for member in members]
    assert [m["format"] for m in manifest["members"]] == [
        "onnx",
        "xgboost-json",
        "xgboost-ubjson",
        "safetensors",
    ]


def test_bundle_read_refuses_more_unpacked_bytes_than_the_reader_allows():
    data = bundle_write([BundleMember("onnx", b"x" * 1000, 1)], n_classes=2, n_features=5)
    with pytest.raises(ValueError, match="larger than a bundle may hold"):
        bundle_read(data, max_unpacked_bytes=500)


def test_bundle_write_names_files_by_format():
    data = bundle_write(
        [
            BundleMember("onnx", b"a", 1),
            BundleMember("xgboost-json", b"{}", 1),
            BundleMember("safetensors", b"s", 1),
        ],
        n_classes=2,
        n_features=5,
    )
    manifest, members = bundle_read(data)
    assert [m["file"] for m in manifest["members"]] == [
        "member-0000.onnx",
        "member-0001.json",
        "member-0002.safetensors",
    ]
    assert [member.data for member in members] == [b"a", b"{}", b"s"]


def test_a_bundle_hands_each_member_its_own_feature_view():
    """A member that reads the ordinal view gets the one-hot rows converted with the federation's specification."""
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    from workers.features import encode_features, infer_feature_spec
    from workers.modelio.export import export_sklearn_onnx

    generator = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": generator.integers(18, 80, 300).astype(float),
            "work": generator.choice(["a", "b", "c"], 300),
        }
    )
    labels = ((frame["work"] == "b") ^ (frame["age"] > 50)).to_numpy().astype(np.int64)
    spec = infer_feature_spec(frame)
    one_hot, ordinal = encode_features(frame, spec), encode_features(frame, spec, view="ordinal")
    linear = LogisticRegression(max_iter=500).fit(one_hot, labels)
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(ordinal, labels)
    members = [
        BundleMember("onnx", export_sklearn_onnx(linear, one_hot.shape[1]), 1.0, "one_hot"),
        BundleMember("onnx", export_sklearn_onnx(tree, ordinal.shape[1]), 3.0, "ordinal"),
    ]
    expected = (linear.predict_proba(one_hot[:30]) + 3 * tree.predict_proba(ordinal[:30])) / 4
    with_spec = bundle_write(members, n_classes=2, n_features=one_hot.shape[1], feature_spec=spec)
    assert BundleClassifier(with_spec).fit().predict_proba(one_hot[:30]) == pytest.approx(
        expected, abs=1e-4
    )
    without_spec = bundle_write(members, n_classes=2, n_features=one_hot.shape[1])
    with pytest.raises(ValueError, match="read the ordinal view"):
        BundleClassifier(without_spec).fit()
    given = BundleClassifier(without_spec, feature_spec=spec).fit()
    assert given.predict_proba(one_hot[:30]) == pytest.approx(expected, abs=1e-4)


def test_a_bundle_names_each_members_classes_and_reads_them_back():
    members = [
        BundleMember("onnx", b"a", 1, classes=(0, 2, 5)),
        BundleMember("xgboost-json", b"{}", 1, classes=(0, 1, 2, 3, 4, 5)),
        BundleMember("onnx", b"c", 1),
    ]
    manifest, read = bundle_read(bundle_write(members, n_classes=6, n_features=5))
    assert [member.get("classes") for member in manifest["members"]] == [
        [0, 2, 5],
        [0, 1, 2, 3, 4, 5],
        None,
    ]
    assert [member.classes for member in read] == [(0, 2, 5), (0, 1, 2, 3, 4, 5), None]


def test_a_bundle_holds_the_onnx_twin_of_a_member_in_another_format_and_reads_it_back():
    members = [
        BundleMember("xgboost-json", b"{}", 1, classes=(0, 1, 2), onnx_twin=b"twin"),
        BundleMember("onnx", b"a", 1),
    ]
    data = bundle_write(members, n_classes=3, n_features=5)
    manifest, read = bundle_read(data)
    assert [member.get("onnx_file") for member in manifest["members"]] == ["member-0000.onnx", None]
    assert read == [
        BundleMember("xgboost-json", b"{}", 1.0, "one_hot", (0, 1, 2), b"twin"),
        BundleMember("onnx", b"a", 1.0, "one_hot"),
    ]


@pytest.mark.parametrize(
    "member",
    [
        {"file": "a.json", "format": "xgboost-json", "weight": 1, "onnx_file": "missing.onnx"},
        {"file": "a.json", "format": "xgboost-json", "weight": 1, "onnx_file": "a.json"},
        {"file": "a.json", "format": "xgboost-json", "weight": 1, "onnx_file": "manifest.json"},
        {"file": "b.onnx", "format": "onnx", "weight": 1, "onnx_file": "b.onnx"},
    ],
)
def test_bundle_read_refuses_an_onnx_twin_that_is_not_another_file_of_a_non_onnx_member(member):
    import io
    import json
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "manifest.json", json.dumps({"n_classes": 2, "n_features": 3, "members": [member]})
        )
        archive.writestr("a.json", b"{}")
        archive.writestr("b.onnx", b"x")
    with pytest.raises(ValueError, match=re.escape(f"Member {member['file']} names ONNX twin")):
        bundle_read(buffer.getvalue())


def test_an_ensemble_bundle_names_every_class_for_each_member():
    features, labels = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(features, labels)
    manifest, _ = bundle_read(EnsembleClassifier([model], n_classes=3).fit(features).to_bundle())
    assert manifest["members"][0]["classes"] == [0, 1, 2]
