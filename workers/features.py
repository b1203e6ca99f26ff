"""Tabular data → the numeric feature matrix every model of a federation reads.

A *feature specification* is a JSON-ready dict inferred once from a federation's public
dataset. Silos download it and apply :func:`encode_features` to their own data, so every
party's models read the same columns in the same order with the same encoding:

- numeric columns are standardised with the public data's mean and standard deviation, and a
  missing value becomes 0 (the mean);
- categorical columns are one-hot encoded over the categories seen in the public data; a missing
  value or a category the public data lacks encodes as all zeros.

That is the *one-hot view*, for linear and neural families. Tree families (decision trees, random
forests, XGBoost) read the *ordinal view* of the same columns
(:func:`workers.modelio.families.feature_view_for`): one feature per column, numerics raw (a missing
value is the public mean), categoricals as their code, the index in the specification's sorted
``categories`` (missing or unknown: -1). A depth-limited
tree needs one split per category on one-hot columns but a few on codes; on Adult the one-hot view
cost FedKT 2.4 accuracy points (issue 19). The ordinal view is computed from the one-hot matrix
(:func:`ordinal_from_one_hot`), so the market's stored public and evaluation matrices serve both
views, and every specification ever inferred has both. A model that does not say which view it
reads (an old submission) reads the one-hot view.

Tables are read from bytes (CSV, Parquet or NPZ) by :mod:`workers.tables`, which checks every limit
before a table is materialised; its names are re-exported here for the callers that read and encode.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workers.tables import TableError, TableLimits, read_table, table_format  # noqa: F401 - callers import them here
from workers.views import FEATURE_VIEWS, ONE_HOT_VIEW, ORDINAL_VIEW  # noqa: F401 - callers import them here

SPEC_VERSION = (
    2  # 2: the specification lists its views (the columns, and so both views, are unchanged)
)


def infer_feature_spec(
    frame: pd.DataFrame, *, label_column: str | None = None, limits: TableLimits = TableLimits()
) -> dict:
    """Infer a feature specification from a table; the label column, if present, is left out.

    Returns
    -------
    dict
        ``{"version", "columns": [...], "n_features", "feature_names"}``; each column is
        ``{"name", "type": "numeric", "mean", "std"}`` or ``{"name", "type": "categorical",
        "categories": [...]}``.
    """
    columns = []
    for name in frame.columns:
        if name == label_column:
            continue
        values = frame[name]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            categories = sorted(values.dropna().astype(str).unique().tolist())
            if len(categories) > limits.max_categories:
                raise TableError(
                    f"Column '{name}' has {len(categories)} distinct text values; at most "
                    f"{limits.max_categories} categories are allowed. Is it an identifier? Drop it."
                )
            columns.append({"name": name, "type": "categorical", "categories": categories})
        else:
            numbers = values.astype(float)
            std = float(numbers.std(ddof=0)) if numbers.notna().any() else 0.0
            columns.append(
                {
                    "name": name,
                    "type": "numeric",
                    "mean": float(numbers.mean()) if numbers.notna().any() else 0.0,
                    "std": std if std > 0 else 1.0,
                }
            )
    if not columns:
        raise TableError("The table has no feature columns besides the label.")
    feature_names = [name for column in columns for name in _feature_names(column)]
    spec = {
        "version": SPEC_VERSION,
        "columns": columns,
        "n_features": len(feature_names),
        "feature_names": feature_names,
    }
    return {
        **spec,
        "views": {
            view: {
                "n_features": view_width(spec, view),
                "feature_names": view_feature_names(spec, view),
            }
            for view in FEATURE_VIEWS
        },
    }


def _feature_names(column: dict) -> list[str]:
    if column["type"] == "numeric":
        return [column["name"]]
    return [f"{column['name']}={category}" for category in column["categories"]]


def encode_features(frame: pd.DataFrame, spec: dict, *, view: str = ONE_HOT_VIEW) -> np.ndarray:
    """Encode a table with a feature specification, in the one-hot or the ordinal view.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``(n_rows, view_width(spec, view))``.
    """
    check_view(view)
    one_hot = _one_hot_features(frame, spec)
    return one_hot if view == ONE_HOT_VIEW else ordinal_from_one_hot(one_hot, spec)


def _one_hot_features(frame: pd.DataFrame, spec: dict) -> np.ndarray:
    missing = [column["name"] for column in spec["columns"] if column["name"] not in frame.columns]
    if missing:
        raise TableError(
            f"The table lacks the column(s) {', '.join(missing)} that the federation's "
            "feature specification names."
        )
    blocks = []
    for column in spec["columns"]:
        values = frame[column["name"]]
        if column["type"] == "numeric":
            numbers = pd.to_numeric(values, errors="coerce")
            if (numbers.isna() & values.notna()).any():
                raise TableError(
                    f"Column '{column['name']}' must be numeric but holds text values."
                )
            standardised = ((numbers.astype(float) - column["mean"]) / column["std"]).fillna(0.0)
            blocks.append(standardised.to_numpy(dtype=np.float32)[:, None])
        else:
            text = values.astype(str).where(values.notna(), None)
            categories = pd.Categorical(text, categories=column["categories"])
            one_hot = np.zeros((len(frame), len(column["categories"])), dtype=np.float32)
            known = categories.codes >= 0
            one_hot[np.flatnonzero(known), categories.codes[known]] = 1.0
            blocks.append(one_hot)
    return np.hstack(blocks).astype(np.float32, copy=False)


def check_view(view: str) -> str:
    if view not in FEATURE_VIEWS:
        raise TableError(
            f"Unknown feature view {view!r}; choose one of {', '.join(FEATURE_VIEWS)}."
        )
    return view


def view_width(spec: dict, view: str) -> int:
    """Number of features of ``view``: the specification's ``n_features`` one-hot, one per column ordinal."""
    return spec["n_features"] if check_view(view) == ONE_HOT_VIEW else len(spec["columns"])


def view_feature_names(spec: dict, view: str) -> list[str]:
    if check_view(view) == ONE_HOT_VIEW:
        return list(spec["feature_names"])
    return [column["name"] for column in spec["columns"]]


def ordinal_from_one_hot(one_hot: np.ndarray, spec: dict) -> np.ndarray:
    """The ordinal view of a one-hot matrix encoded with ``spec``: numerics un-standardised back to
    raw values, each categorical block replaced by its category's index (-1: missing or unknown)."""
    one_hot = np.asarray(one_hot)
    if one_hot.ndim != 2 or one_hot.shape[1] != spec["n_features"]:
        raise TableError(
            f"The features have {one_hot.shape[-1]} columns but the one-hot view of the "
            f"specification has {spec['n_features']}."
        )
    columns, start = [], 0
    for column in spec["columns"]:
        if column["type"] == "numeric":
            columns.append(one_hot[:, start].astype(np.float64) * column["std"] + column["mean"])
            start += 1
        else:
            block = one_hot[:, start : start + len(column["categories"])]
            columns.append(
                np.where(block.any(axis=1), block.argmax(axis=1), -1)
                if block.shape[1]
                else np.full(len(one_hot), -1)
            )
            start += block.shape[1]
    return (
        np.column_stack(columns).astype(np.float32)
        if columns
        else np.empty((len(one_hot), 0), np.float32)
    )


def features_in_view(one_hot: np.ndarray, spec: dict, view: str) -> np.ndarray:
    """A stored one-hot matrix (public data, evaluation split) in the view a model reads."""
    return one_hot if check_view(view) == ONE_HOT_VIEW else ordinal_from_one_hot(one_hot, spec)


def encode_labels(values: pd.Series, class_labels: list[str]) -> np.ndarray:
    """Map label values to class indices 0 … K-1 in the order of ``class_labels`` (compared as text)."""
    index_of = {label: index for index, label in enumerate(class_labels)}
    text = values.astype(str).str.strip()
    unknown = sorted(set(text) - set(index_of))
    if unknown:
        shown = ", ".join(repr(label) for label in unknown[:5])
        raise TableError(
            f"The label column holds {shown}, which the federation's class labels "
            f"({', '.join(class_labels)}) do not include."
        )
    return text.map(index_of).to_numpy(dtype=np.int64)
