"""The rows of a prediction request: checked over every row at once, with the row-by-row sentence for the first
bad row and column, and read into the same table either way."""

import math

import numpy as np
import pandas as pd
import pytest

from market.commerce.prediction_rows import prediction_frame
from market.errors import InvalidInput

SPEC = {
    "columns": [
        {"name": "age", "type": "numeric"},
        {"name": "work", "type": "categorical"},
        {"name": "hours", "type": "numeric"},
    ]
}


def good_rows(count: int = 50) -> list[dict]:
    return [
        {"age": 20 + row % 40, "work": ["Private", "State-gov"][row % 2], "hours": 40.5, "y": "x"}
        for row in range(count)
    ]


def frame_of(rows):
    return prediction_frame(rows=rows, csv_data=None, spec=SPEC, label_column="y")


def reference_frame(rows) -> pd.DataFrame:
    """The table as the row-by-row reading builds it: blanks read as missing, only the feature columns."""
    cleaned = [
        {
            key: None if isinstance(value, str) and not value.strip() else value
            for key, value in row.items()
        }
        for row in rows
    ]
    return pd.DataFrame.from_records(cleaned, columns=["age", "work", "hours"])


@pytest.mark.parametrize(
    "row_number, bad_row, sentence",
    [
        (3, "not an object", "Row 3 must be an object of column → value, not str."),
        (
            2,
            {"age": 1, "work": "a", "hours": 1, "zip": 9},
            "Row 2, column 'zip': the federation's features have no such column.",
        ),
        (
            4,
            {"age": 1, "hours": 1},
            "Row 4, column 'work': missing; every row needs every feature column (null for a missing value).",
        ),
        (
            5,
            {"age": [1], "work": "a", "hours": 1},
            "Row 5, column 'age': expected a plain value, got list.",
        ),
        (
            2,
            {"age": "forty", "work": "a", "hours": 1},
            "Row 2, column 'age': expected a number, got 'forty'.",
        ),
        (
            6,
            {"age": True, "work": "a", "hours": 1},
            "Row 6, column 'age': expected a number, got True.",
        ),
        (
            7,
            {"age": 1, "work": "a", "hours": math.inf},
            "Row 7, column 'hours': expected a finite number, got inf.",
        ),
        (
            8,
            {"age": math.nan, "work": "a", "hours": 1},
            "Row 8, column 'age': expected a finite number, got nan.",
        ),
        (
            9,
            {"age": 1, "work": {"a": 1}, "hours": 1},
            "Row 9, column 'work': expected a plain value, got dict.",
        ),
    ],
)
def test_the_first_bad_row_is_named_with_its_column(row_number, bad_row, sentence):
    rows = good_rows()
    rows[row_number - 1] = bad_row
    rows[row_number + 5] = {
        "age": "also bad",
        "work": "a",
        "hours": 1,
    }  # a later bad row is not the one named
    with pytest.raises(InvalidInput) as refusal:
        frame_of(rows)
    assert str(refusal.value) == sentence


def test_plain_rows_read_into_the_same_table_as_the_row_by_row_reading():
    rows = good_rows()
    rows[3]["age"] = None
    rows[4]["work"] = None
    pd.testing.assert_frame_equal(frame_of(rows), reference_frame(rows))


def test_text_numbers_and_blanks_read_as_the_row_by_row_reading_reads_them():
    rows = good_rows()
    rows[1]["age"] = " 39 "
    rows[2]["hours"] = "  "
    rows[3]["work"] = ""
    frame = frame_of(rows)
    pd.testing.assert_frame_equal(frame, reference_frame(rows))
    assert frame["work"].isna().tolist()[3] and np.isnan(float(frame["hours"][2]))
