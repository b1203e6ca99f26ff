import io

import numpy as np
import pandas as pd
import pytest

from workers.features import (
    TableError,
    TableLimits,
    encode_features,
    encode_labels,
    infer_feature_spec,
    read_table,
)

CSV = b"age,workclass,income\n30,Private,<=50K\n50,?,>50K\n40,State-gov,<=50K\n"


def test_read_table_reads_csv_with_question_marks_as_missing():
    frame = read_table(CSV)
    assert frame.shape == (3, 3)
    assert frame["workclass"].isna().tolist() == [False, True, False]


def test_infer_and_encode_standardise_numbers_and_one_hot_categories():
    frame = read_table(CSV)
    spec = infer_feature_spec(frame, label_column="income")
    assert spec["feature_names"] == ["age", "workclass=Private", "workclass=State-gov"]
    assert spec["columns"][0] == {
        "name": "age",
        "type": "numeric",
        "mean": 40.0,
        "std": pytest.approx(8.16496580927726),
    }
    encoded = encode_features(frame, spec)
    assert encoded.dtype == np.float32
    np.testing.assert_allclose(
        encoded, [[-1.2247449, 1, 0], [1.2247449, 0, 0], [0, 0, 1]], rtol=1e-6
    )


def test_categories_are_sorted_whatever_order_the_rows_come_in():
    """The one-hot columns are the categories in sorted order, not in the order the rows first show them: the
    same public rows, in any order, give the same specification and the same encoded matrix."""
    frame = read_table(b"colour,label\nred,a\nblue,b\ngreen,a\nred,b\nBlue,a\n")
    spec = infer_feature_spec(frame, label_column="label")
    assert spec["columns"] == [
        {"name": "colour", "type": "categorical", "categories": ["Blue", "blue", "green", "red"]}
    ]
    assert spec["feature_names"] == ["colour=Blue", "colour=blue", "colour=green", "colour=red"]
    reversed_frame = frame.iloc[::-1].reset_index(drop=True)
    assert infer_feature_spec(reversed_frame, label_column="label") == spec
    np.testing.assert_array_equal(
        encode_features(frame, spec),
        [[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]],
    )


def test_encode_features_gives_unseen_categories_all_zeros():
    spec = infer_feature_spec(read_table(CSV), label_column="income")
    encoded = encode_features(pd.DataFrame({"age": [40], "workclass": ["Never-worked"]}), spec)
    np.testing.assert_array_equal(encoded, [[0, 0, 0]])


def test_read_table_reads_parquet_and_npz_by_content():
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]})
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    assert read_table(buffer.getvalue()).equals(frame)
    buffer = io.BytesIO()
    np.savez(buffer, X=np.eye(2), y=np.array([0, 1]))
    assert read_table(buffer.getvalue()).columns.tolist() == ["f0", "f1", "label"]


def test_read_table_refuses_object_arrays_in_npz():
    buffer = io.BytesIO()
    np.savez(buffer, X=np.array([[object()]], dtype=object))
    with pytest.raises(TableError, match="object arrays"):
        read_table(buffer.getvalue())


def test_read_table_checks_archive_size_before_unpacking():
    buffer = io.BytesIO()
    np.savez(buffer, X=np.zeros((1000, 10)))
    with pytest.raises(TableError, match="unpacks to"):
        read_table(buffer.getvalue(), limits=TableLimits(max_unpacked_bytes=1000))


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"a,b\n", "no rows"),
        (b"a,b\n1,2,3\n", "malformed"),
        (b"\xff\xfe\x00bad", "UTF-8"),
    ],
)
def test_read_table_explains_bad_files(data, message):
    with pytest.raises(TableError, match=message):
        read_table(data)


def test_encode_labels_names_unknown_labels():
    assert encode_labels(pd.Series(["<=50K", ">50K"]), ["<=50K", ">50K"]).tolist() == [0, 1]
    with pytest.raises(TableError, match="'maybe'"):
        encode_labels(pd.Series(["maybe"]), ["<=50K", ">50K"])


def test_encode_features_names_missing_columns():
    spec = infer_feature_spec(read_table(CSV), label_column="income")
    with pytest.raises(TableError, match="workclass"):
        encode_features(pd.DataFrame({"age": [1]}), spec)
