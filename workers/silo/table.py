"""The silo's table on its own machine: read it (CSV, Parquet or NPZ, recognised by content), encode it with the
federation's feature specification, and hold rows out for scoring. What encoding had to paper over (missing
values, categories the specification does not know) is reported, not hidden: it goes into the upload's metadata.

Everything here raises :class:`workers.silo.errors.DataError` with a sentence for the silo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workers.features import (
    ONE_HOT_VIEW,
    TableError,
    encode_features,
    encode_labels,
    read_table,
)
from workers.silo.errors import DataError


@dataclass(frozen=True)
class EncodedData:
    """A silo's rows in the federation's encoding; ``report`` says what encoding had to paper over."""

    features: np.ndarray
    labels: np.ndarray
    report: dict


def load_table(path: Path) -> pd.DataFrame:
    """The silo's CSV, Parquet or NPZ table (recognised by content)."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DataError(f"Cannot read {path}: {error.strerror}.") from error
    try:
        return read_table(data)
    except TableError as error:
        raise DataError(f"{path}: {error}") from error


def encode_silo_table(
    frame: pd.DataFrame,
    spec: dict,
    *,
    label_column: str,
    class_labels: list[str],
    view: str = ONE_HOT_VIEW,
) -> EncodedData:
    """Encode features with the federation's specification, in ``view``, and map labels to its classes.

    Missing feature values encode as the public mean (numeric) or all zeros (categorical);
    categories the public data lacks encode as all zeros. Rows without a label are dropped.
    Columns the specification does not name are ignored. All of it is counted in ``report``.
    """
    if label_column not in frame.columns:
        raise DataError(
            f"The table has no '{label_column}' column, the federation's label column; name the column "
            f"holding your labels '{label_column}' (or pass --label-column)."
        )
    expected = [column["name"] for column in spec["columns"]]
    missing = [name for name in expected if name not in frame.columns]
    if missing:
        raise DataError(
            f"The table lacks the column(s) {', '.join(missing)} that the federation's feature "
            f"specification names; it expects {', '.join(expected)} plus '{label_column}'."
        )
    labelled = frame[frame[label_column].notna()].reset_index(drop=True)
    labels = _encode_silo_labels(labelled[label_column], class_labels)
    try:
        features = encode_features(labelled, spec, view=view)
    except TableError as error:
        raise DataError(str(error)) from error
    report = {
        "rows": int(len(frame)),
        "rows_without_label": int(len(frame) - len(labelled)),
        "ignored_columns": [
            name for name in frame.columns if name not in expected and name != label_column
        ],
        "missing_values": _missing_values(labelled, spec),
        "unknown_categories": _unknown_categories(labelled, spec),
    }
    return EncodedData(features, labels, report)


def _encode_silo_labels(values: pd.Series, class_labels: list[str]) -> np.ndarray:
    if pd.api.types.is_float_dtype(values) and np.all(np.mod(values, 1) == 0):
        values = values.astype(np.int64)  # 1.0 read from a CSV is the class "1"
    text = values.astype(str).str.strip()
    known = set(class_labels)
    # Adult's test file writes ">50K." for ">50K": accept a trailing full stop the classes lack
    text = text.map(
        lambda value: (
            value[:-1]
            if value not in known and value[:-1] in known and value.endswith(".")
            else value
        )
    )
    try:
        return encode_labels(text, class_labels)
    except TableError as error:
        raise DataError(str(error)) from error


def _missing_values(frame: pd.DataFrame, spec: dict) -> dict[str, int]:
    counts = {column["name"]: int(frame[column["name"]].isna().sum()) for column in spec["columns"]}
    return {name: count for name, count in counts.items() if count}


def _unknown_categories(frame: pd.DataFrame, spec: dict) -> dict[str, dict[str, int]]:
    unknown = {}
    for column in spec["columns"]:
        if column["type"] != "categorical":
            continue
        values = frame[column["name"]].dropna().astype(str)
        outside = values[~values.isin(column["categories"])].value_counts()
        if len(outside):
            unknown[column["name"]] = {str(value): int(count) for value, count in outside.items()}
    return unknown


def validation_split(
    labels: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of training and held-out rows (stratified when every class has two rows or more)."""
    from sklearn.model_selection import train_test_split

    if not 0 < fraction < 1:
        raise DataError(f"The validation fraction must lie between 0 and 1, not {fraction}.")
    indices = np.arange(len(labels))
    stratify = (
        labels
        if np.bincount(labels).min(initial=len(labels)) >= 2 and len(np.unique(labels)) > 1
        else None
    )
    try:
        train, held_out = train_test_split(
            indices, test_size=fraction, random_state=seed, stratify=stratify
        )
    except ValueError:
        train, held_out = train_test_split(indices, test_size=fraction, random_state=seed)
    return np.sort(train), np.sort(held_out)
