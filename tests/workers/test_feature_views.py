"""The one-hot and ordinal views of a federation's feature specification (issue 19)."""

import numpy as np
import pandas as pd
import pytest

from workers.features import (
    TableError,
    encode_features,
    features_in_view,
    infer_feature_spec,
    ordinal_from_one_hot,
    read_table,
    view_feature_names,
    view_width,
)
from workers.modelio.families import feature_view_for

CSV = b"age,workclass,income\n30,Private,<=50K\n50,?,>50K\n40,State-gov,<=50K\n"


def spec_of_csv() -> dict:
    return infer_feature_spec(read_table(CSV), label_column="income")


def test_ordinal_view_keeps_raw_numbers_and_codes_categories_by_their_sorted_index():
    spec = spec_of_csv()
    rows = pd.DataFrame(
        {"age": [30, None, 61], "workclass": ["State-gov", "Private", "Never-worked"]}
    )
    encoded = encode_features(rows, spec, view="ordinal")
    assert encoded.dtype == np.float32
    # missing age: the public mean (40); an unknown category: -1
    np.testing.assert_allclose(encoded, [[30, 1], [40, 0], [61, -1]], rtol=1e-6)


def test_ordinal_view_of_a_missing_category_is_minus_one():
    spec = spec_of_csv()
    np.testing.assert_allclose(
        encode_features(read_table(CSV), spec, view="ordinal"),
        [[30, 0], [50, -1], [40, 1]],
        rtol=1e-6,
    )


def test_the_specification_lists_both_views_and_keeps_the_one_hot_width_on_top():
    spec = spec_of_csv()
    assert spec["version"] == 2
    assert spec["n_features"] == 3
    assert spec["views"] == {
        "one_hot": {
            "n_features": 3,
            "feature_names": ["age", "workclass=Private", "workclass=State-gov"],
        },
        "ordinal": {"n_features": 2, "feature_names": ["age", "workclass"]},
    }


def test_a_version_1_specification_without_views_serves_both_views():
    spec = spec_of_csv()
    old = {key: spec[key] for key in ("columns", "n_features", "feature_names")} | {"version": 1}
    assert view_width(old, "ordinal") == 2 and view_feature_names(old, "ordinal") == [
        "age",
        "workclass",
    ]
    np.testing.assert_array_equal(
        encode_features(read_table(CSV), old, view="ordinal"),
        encode_features(read_table(CSV), spec, view="ordinal"),
    )


def test_the_ordinal_view_of_a_stored_one_hot_matrix_equals_encoding_the_table_directly():
    frame = pd.DataFrame(
        {
            "x": np.linspace(-3, 7, 50),
            "colour": (["red", "green", None, "blue", "teal"] * 10),
            "size": np.arange(50) % 4,
        }
    )
    spec = infer_feature_spec(frame.head(30))
    one_hot = encode_features(frame, spec)
    np.testing.assert_array_equal(
        features_in_view(one_hot, spec, "ordinal"), encode_features(frame, spec, view="ordinal")
    )
    assert features_in_view(one_hot, spec, "one_hot") is one_hot


def test_ordinal_from_one_hot_refuses_a_matrix_of_another_width():
    with pytest.raises(
        TableError, match="2 columns but the one-hot view of the specification has 3"
    ):
        ordinal_from_one_hot(np.zeros((4, 2)), spec_of_csv())


def test_an_unknown_view_is_refused_with_the_choices():
    with pytest.raises(TableError, match="one_hot, ordinal"):
        encode_features(read_table(CSV), spec_of_csv(), view="native")


@pytest.mark.parametrize(
    "families, view",
    [
        (("random_forest",), "ordinal"),
        (("decision_tree", "random_forest"), "ordinal"),
        (("xgboost",), "ordinal"),
        (("decision_tree", "mlp"), "one_hot"),
        (("logistic_regression",), "one_hot"),
        (("cnn",), "one_hot"),
        ((), "one_hot"),
    ],
)
def test_tree_families_read_the_ordinal_view_and_any_other_mix_the_one_hot_view(families, view):
    assert feature_view_for(*families) == view
