"""The rows of a prediction request as a table in the federation's raw schema, or a 400 naming the first bad row
and column (rows count from 1; in CSV, the first line after the header is row 1).

Every row is checked: an object of column → value, no unknown column, every feature column present, plain values,
numbers (or blanks) in numeric columns, finite. The checks run per column over every row at once
(:func:`_rows_need_row_checks`); only when a column holds something they cannot clear at once (a value that is not
a plain number, text in a numeric column, a row of other columns) do the row-by-row checks run
(:func:`_check_rows`), which find the first offending row and say what is wrong with it, so that the sentence is
the same either way.
"""

import math
from operator import itemgetter

import numpy as np
import pandas as pd
from django.conf import settings

from market.errors import InvalidInput
from workers.features import TableError, TableLimits, read_table

PLAIN_TYPES = (int, float, str, bool, type(None))
NUMBER_TYPES = frozenset({int, float, type(None)})


def _check_value(value, *, column: dict, row_number: int) -> None:
    if column["type"] != "numeric" or value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidInput(
            f"Row {row_number}, column '{column['name']}': expected a number, got {value!r}."
        )
    if isinstance(value, str) and not value.strip():
        return
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(
            f"Row {row_number}, column '{column['name']}': expected a number, got {value!r}."
        ) from None
    if not math.isfinite(number):
        raise InvalidInput(
            f"Row {row_number}, column '{column['name']}': expected a finite number, got {value!r}."
        )


def _check_rows(records: list, *, spec: dict, ignored: set[str]) -> None:
    known = {column["name"] for column in spec["columns"]} | ignored
    for row_number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise InvalidInput(
                f"Row {row_number} must be an object of column → value, not {type(record).__name__}."
            )
        unknown = sorted(set(record) - known)
        if unknown:
            raise InvalidInput(
                f"Row {row_number}, column '{unknown[0]}': the federation's features have no such "
                "column."
            )
        for column in spec["columns"]:
            if column["name"] not in record:
                raise InvalidInput(
                    f"Row {row_number}, column '{column['name']}': missing; every row needs every "
                    "feature column (null for a missing value)."
                )
            value = record[column["name"]]
            if value is not None and not isinstance(value, (int, float, str, bool)):
                raise InvalidInput(
                    f"Row {row_number}, column '{column['name']}': expected a plain value, got "
                    f"{type(value).__name__}."
                )
            _check_value(value, column=column, row_number=row_number)


def prediction_frame(
    *, rows: list | None, csv_data: bytes | None, spec: dict, label_column: str
) -> pd.DataFrame:
    """The request's rows as a table in the federation's raw schema; a malformed row is a 400 naming row and
    column (rows count from 1; in CSV, the first line after the header is row 1)."""
    if csv_data is not None:
        try:
            frame = read_table(
                csv_data,
                limits=TableLimits(
                    max_rows=settings.ONEFOLD_PREDICT_MAX_ROWS,
                    max_memory_bytes=settings.ONEFOLD_TABLE_MAX_MEMORY_BYTES,
                ),
            )
        except TableError as error:
            raise InvalidInput(str(error)) from None
        records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    else:
        if not isinstance(rows, list) or not rows:
            raise InvalidInput(
                'Send {"rows": [{column: value, ...}, ...]} with at least one row, or a CSV body.'
            )
        records = rows
    if len(records) > settings.ONEFOLD_PREDICT_MAX_ROWS:
        raise InvalidInput(
            f"Send at most {settings.ONEFOLD_PREDICT_MAX_ROWS} rows per request, not {len(records)}."
        )
    columns = _columns_or_none(records, spec=spec, ignored={label_column})
    if columns is None or _rows_need_row_checks(columns, spec=spec):
        _check_rows(records, spec=spec, ignored={label_column})
    names = [column["name"] for column in spec["columns"]]
    if columns is not None and not _holds_blank_text(columns):
        return pd.DataFrame.from_records(records, columns=names)
    blank_as_missing = [
        {
            name: None if isinstance(value, str) and not value.strip() else value
            for name, value in record.items()
        }
        for record in records
    ]
    return pd.DataFrame.from_records(blank_as_missing, columns=names)


def _columns_or_none(records: list, *, spec: dict, ignored: set[str]) -> dict[str, list] | None:
    """Each feature column's values over every row, or ``None`` when some row is not an object of exactly the
    known columns with every feature column (the row-by-row checks then say which)."""
    known = {column["name"] for column in spec["columns"]} | ignored
    names = {column["name"] for column in spec["columns"]}
    if any(type(record) is not dict for record in records):
        return None
    for keys in {tuple(record) for record in records}:  # rows usually share one key order
        if not names <= set(keys) <= known:
            return None
    ordered = sorted(names)
    values = zip(*map(itemgetter(*ordered), records)) if len(ordered) > 1 else None
    if values is None:
        return {ordered[0]: [record[ordered[0]] for record in records]}
    return {name: list(column) for name, column in zip(ordered, values)}


def _rows_need_row_checks(columns: dict[str, list], *, spec: dict) -> bool:
    """Whether a column holds a value the checks cannot clear column-wide: not a plain value, or in a numeric
    column anything but a finite int or float or null (text, a bool, NaN or infinity)."""
    for column in spec["columns"]:
        values = columns[column["name"]]
        types = set(map(type, values))
        if not types <= set(PLAIN_TYPES):
            return True
        if column["type"] != "numeric":
            continue
        if not types <= NUMBER_TYPES:
            return True
        # null reads as NaN; any other NaN or infinity is a value the row checks refuse
        numbers = np.array(values, dtype=float)
        if np.count_nonzero(~np.isfinite(numbers)) != values.count(None):
            return True
    return False


def _holds_blank_text(columns: dict[str, list]) -> bool:
    """Whether any value is text of blanks only (read as missing)."""
    return any(
        type(value) is str and not value.strip()
        for values in columns.values()
        for value in set(values)  # the distinct values: a column repeats its categories
    )
