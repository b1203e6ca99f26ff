"""The raw-column ONNX: onnxruntime alone, on raw Adult rows read from CSV, gives the probabilities the market
computes by encoding the rows first (workers.features) and running the model on the encoded matrix."""

import csv
import io
import json

import numpy as np
import onnx
import onnxruntime
import pytest

from tests.conftest import ADULT_LABELS
from workers.features import ORDINAL_VIEW, encode_features, infer_feature_spec, read_table
from workers.modelio.raw_columns import (
    CLASS_LABELS_KEY,
    INPUT_SCHEMA_KEY,
    RawColumnMember,
    input_schema,
    raw_column_onnx,
)


def raw_inputs(session, csv_text: str) -> dict:
    """What a buyer writes with the csv module and numpy only: one [N, 1] array per graph input."""
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    inputs = {}
    for graph_input in session.get_inputs():
        values = [row[graph_input.name] for row in rows]
        if graph_input.type == "tensor(double)":
            inputs[graph_input.name] = np.array(
                [float(value) if value else np.nan for value in values]
            )[:, None]
        else:
            inputs[graph_input.name] = np.array(values, dtype=object)[:, None]
    return inputs


@pytest.fixture(scope="module")
def adult_rows(adult_frame, adult_public_csv):
    spec = infer_feature_spec(read_table(adult_public_csv), label_column="income")
    rows = adult_frame.iloc[2000:2300].drop(columns=["income"]).reset_index(drop=True)
    rows.iloc[0, 0] = np.nan  # a missing numeric
    rows.loc[
        1, [column["name"] for column in spec["columns"] if column["type"] == "categorical"][0]
    ] = None
    buffer = io.StringIO()
    rows.to_csv(buffer, index=False)
    return spec, rows, buffer.getvalue()


def test_raw_column_forest_reproduces_the_encoded_models_probabilities(
    adult_rows, model_files, adult_models
):
    spec, rows, csv_text = adult_rows
    raw = raw_column_onnx(
        [RawColumnMember(model_files["forest.onnx"])], spec=spec, class_labels=ADULT_LABELS
    )
    session = onnxruntime.InferenceSession(raw, providers=["CPUExecutionProvider"])
    probabilities, labels = session.run(["probabilities", "label"], raw_inputs(session, csv_text))
    expected = adult_models["forest"].predict_proba(encode_features(rows, spec))
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    assert list(labels) == [ADULT_LABELS[index] for index in probabilities.argmax(axis=1)]


def test_raw_column_ensemble_mixes_views_and_weights(adult_rows, adult_frame):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx

    spec, rows, csv_text = adult_rows
    training = adult_frame.iloc[:1000]
    labels = (training["income"].astype(str).str.strip() == ADULT_LABELS[1]).astype(int).to_numpy()
    one_hot, ordinal = (
        encode_features(training, spec),
        encode_features(training, spec, view=ORDINAL_VIEW),
    )
    linear = LogisticRegression(max_iter=500).fit(one_hot, labels)
    trees = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(
        ordinal, labels
    )
    raw = raw_column_onnx(
        [
            RawColumnMember(export_sklearn_onnx(linear, one_hot.shape[1]), weight=1.0),
            RawColumnMember(
                export_sklearn_onnx(trees, ordinal.shape[1]), weight=3.0, feature_view=ORDINAL_VIEW
            ),
        ],
        spec=spec,
        class_labels=ADULT_LABELS,
    )
    session = onnxruntime.InferenceSession(raw, providers=["CPUExecutionProvider"])
    (probabilities,) = session.run(["probabilities"], raw_inputs(session, csv_text))
    expected = 0.25 * linear.predict_proba(
        encode_features(rows, spec)
    ) + 0.75 * trees.predict_proba(encode_features(rows, spec, view=ORDINAL_VIEW))
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)


def test_raw_column_model_carries_its_input_schema_and_class_labels(adult_rows, model_files):
    spec, _, _ = adult_rows
    raw = onnx.load_from_string(
        raw_column_onnx(
            [RawColumnMember(model_files["forest.onnx"])], spec=spec, class_labels=ADULT_LABELS
        )
    )
    metadata = {prop.key: prop.value for prop in raw.metadata_props}
    assert json.loads(metadata[CLASS_LABELS_KEY]) == ADULT_LABELS
    assert json.loads(metadata[INPUT_SCHEMA_KEY]) == input_schema(spec)
    assert [graph_input.name for graph_input in raw.graph.input] == [
        column["name"] for column in spec["columns"]
    ]


def test_raw_column_model_refuses_no_members_or_a_zero_weight(adult_rows, model_files):
    spec, _, _ = adult_rows
    with pytest.raises(ValueError, match="at least one member"):
        raw_column_onnx([], spec=spec, class_labels=ADULT_LABELS)
    with pytest.raises(ValueError, match="positive weight"):
        raw_column_onnx(
            [RawColumnMember(model_files["forest.onnx"], weight=0.0)],
            spec=spec,
            class_labels=ADULT_LABELS,
        )


def test_members_that_saw_some_classes_are_widened_to_every_class_in_the_federations_order(
    adult_rows,
):
    """Six classes; one member saw classes 0, 2 and 5, another 2 and 3: each member's columns land on its classes,
    the classes no member saw get exactly 0, and the average is the market's (workers.modelio.native)."""
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.base import widened_probabilities
    from workers.modelio.export import export_sklearn_onnx
    from workers.silo.students import relabelled_onnx

    spec, rows, csv_text = adult_rows
    features = encode_features(rows, spec)
    labels = ["a", "b", "c", "d", "e", "f"]
    local = [np.arange(len(rows)) % 3, np.arange(len(rows)) % 2]  # 0 .. k-1, as each silo trains
    members, expected = [], 0.0
    for classes, local_labels, weight in zip(([0, 2, 5], [2, 3]), local, (1.0, 3.0)):
        model = LogisticRegression(max_iter=300).fit(features, local_labels)
        members.append(
            RawColumnMember(
                relabelled_onnx(export_sklearn_onnx(model, features.shape[1]), classes),
                weight=weight,
            )
        )
        expected = expected + weight / 4 * widened_probabilities(
            model.predict_proba(features), classes=classes, n_classes=6
        )
    raw = raw_column_onnx(members, spec=spec, class_labels=labels)
    session = onnxruntime.InferenceSession(raw, providers=["CPUExecutionProvider"])
    probabilities, predicted = session.run(
        ["probabilities", "label"], raw_inputs(session, csv_text)
    )
    assert probabilities.shape == (len(rows), 6)
    assert (probabilities[:, [1, 4]] == 0).all()
    np.testing.assert_allclose(probabilities, expected, atol=1e-6)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    assert list(predicted) == [labels[index] for index in probabilities.argmax(axis=1)]


def test_a_member_naming_a_class_the_federation_does_not_have_is_refused(adult_rows, model_files):
    from workers.silo.students import relabelled_onnx

    spec, _, _ = adult_rows
    with pytest.raises(
        ValueError, match="predicts class 2, but the federation's classes are 0 to 1"
    ):
        raw_column_onnx(
            [RawColumnMember(relabelled_onnx(model_files["forest.onnx"], [0, 2]))],
            spec=spec,
            class_labels=ADULT_LABELS,
        )
