"""Structural validation of XGBoost JSON and UBJSON models before XGBoost sees the bytes.

A tampered tree (a child index past the end, a cycle, a node with two parents, a split on a
feature the data does not have) loads without complaint in XGBoost and then crashes or hangs
at predict time, so every tree is walked here first.
"""

from __future__ import annotations

import json
import math

import numpy as np

from workers.modelio.base import ModelFormat, ModelInfo, ModelLimits, RefusedModelError, refuse
from workers.modelio.trees import check_binary_tree
from workers.modelio.ubjson import decode_ubjson

OBJECTIVES = {"binary:logistic", "reg:logistic", "multi:softprob", "multi:softmax"}
NODE_INT_ARRAYS = (
    "left_children",
    "right_children",
    "parents",
    "split_indices",
    "default_left",
    "split_type",
)
NODE_FLOAT_ARRAYS = ("split_conditions", "base_weights", "loss_changes", "sum_hessian")
CATEGORY_ARRAYS = ("categories", "categories_nodes", "categories_segments", "categories_sizes")
ROOT_PARENT = 2147483647


def inspect_xgboost(
    data: bytes, model_format: ModelFormat, *, n_features: int, n_classes: int, limits: ModelLimits
) -> ModelInfo:
    """Validate an XGBoost JSON or UBJSON model statically; see ``inspect_model``."""
    document = _decode(data, model_format)
    learner = _object(document, "learner")
    objective = _object(learner, "objective").get("name")
    if objective not in OBJECTIVES:
        raise refuse(
            f"The XGBoost objective {objective!r} is not accepted; train a classifier with one of "
            f"{', '.join(sorted(OBJECTIVES))}."
        )
    parameters = _object(learner, "learner_model_param")
    num_feature = _int_text(parameters.get("num_feature"), "num_feature")
    if num_feature != n_features:
        raise refuse(
            f"The model expects {num_feature} features but the federation's public data has {n_features}."
        )
    classes = _classes(objective, parameters, n_classes)
    _check_base_score(parameters.get("base_score"))
    _check_feature_types(learner)
    booster = _object(learner, "gradient_booster")
    if booster.get("name") != "gbtree":
        raise refuse(
            f"The XGBoost booster {booster.get('name')!r} is not accepted; train with booster='gbtree'."
        )
    trees = _trees(_object(booster, "model"), len(classes) if len(classes) > 2 else 1, limits)
    depths = [_check_tree(tree, index, num_feature, limits) for index, tree in enumerate(trees)]
    return ModelInfo(
        format=model_format,
        n_features=num_feature,
        classes=classes,
        family="xgboost",
        detail={"n_trees": len(trees), "max_depth": max(depths, default=0), "objective": objective},
    )


def _decode(data: bytes, model_format: ModelFormat) -> dict:
    if model_format == ModelFormat.XGBOOST_UBJSON:
        document = decode_ubjson(data)
    else:
        try:
            document = json.loads(data, parse_constant=_refuse_constant)
        except RefusedModelError:
            raise
        except (ValueError, RecursionError):
            raise refuse("The XGBoost JSON model is not valid JSON; the file is damaged.") from None
    if not isinstance(document, dict):
        raise refuse("The XGBoost model must be a JSON object with a 'learner'.")
    return document


def _refuse_constant(name: str):
    raise refuse(f"The XGBoost model contains {name}; every number must be finite.")


def _object(container: dict, key: str) -> dict:
    value = container.get(key)
    if not isinstance(value, dict):
        raise refuse(
            f"The XGBoost model has no '{key}' object; export it with save_model or save_raw."
        )
    return value


def _int_text(value, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise refuse(f"The XGBoost model's '{name}' must be an integer, not {value!r}.") from None
    if isinstance(value, bool) or number < 0 or number > 2**31:
        raise refuse(f"The XGBoost model's '{name}' is out of range: {value!r}.")
    return number


def _classes(objective: str, parameters: dict, n_classes: int) -> tuple[int, ...]:
    num_class = _int_text(parameters.get("num_class", "0"), "num_class")
    if _int_text(parameters.get("num_target", "1"), "num_target") != 1:
        raise refuse("Multi-target XGBoost models are not accepted; train one classifier.")
    if objective.startswith("multi:"):
        if not 2 <= num_class <= n_classes:
            raise refuse(f"The model has {num_class} classes but the federation has {n_classes}.")
        return tuple(range(num_class))
    if num_class > 1 or n_classes < 2:
        raise refuse(
            f"The binary XGBoost model does not fit a federation with {n_classes} classes."
        )
    return (0, 1)


def _check_base_score(value) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        scores = [float(part) for part in text.strip("[] ").split(",") if part.strip()]
    except ValueError:
        raise refuse(f"The XGBoost model's base_score {value!r} is not a number.") from None
    if not scores or not all(math.isfinite(score) for score in scores):
        raise refuse(f"The XGBoost model's base_score {value!r} must be finite.")


def _check_feature_types(learner: dict) -> None:
    names = learner.get("feature_names", [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise refuse("The XGBoost model's feature_names must be a list of names.")
    types = learner.get("feature_types", [])
    if not isinstance(types, list) or any(kind not in ("float", "q", "int", "i") for kind in types):
        raise refuse(
            "The XGBoost model uses categorical or unknown feature types; encode features as numbers "
            "the way the federation's feature specification says."
        )


def _trees(model: dict, n_outputs: int, limits: ModelLimits) -> list:
    trees = model.get("trees")
    if not isinstance(trees, list) or not trees:
        raise refuse("The XGBoost model has no trees.")
    if len(trees) > limits.max_trees:
        raise refuse(f"The model has {len(trees)} trees; the limit is {limits.max_trees}.")
    tree_info = _int_array(model.get("tree_info"), "tree_info", len(trees))
    if tree_info.size and (tree_info.min() < 0 or tree_info.max() >= n_outputs):
        raise refuse("The XGBoost model assigns a tree to a class it does not have.")
    count = _int_text(_object(model, "gbtree_model_param").get("num_trees"), "num_trees")
    if count != len(trees):
        raise refuse(f"The XGBoost model declares {count} trees but holds {len(trees)}.")
    indptr = model.get("iteration_indptr")
    if indptr is not None:
        indptr = _int_array(indptr, "iteration_indptr", None)
        if (
            indptr.size == 0
            or indptr[0] != 0
            or indptr[-1] != len(trees)
            or np.any(np.diff(indptr) < 0)
        ):
            raise refuse("The XGBoost model's iteration_indptr does not match its trees.")
    categories = model.get("cats", {})
    if isinstance(categories, dict) and any(
        len(part) for part in categories.values() if hasattr(part, "__len__")
    ):
        raise refuse("Categorical splits are not accepted; encode features as numbers.")
    return trees


def _check_tree(tree, index: int, num_feature: int, limits: ModelLimits) -> int:
    where = f"Tree {index} of the XGBoost model"
    if not isinstance(tree, dict):
        raise refuse(f"{where} is not an object.")
    declared = tree.get("tree_param")
    parameters = declared if isinstance(declared, dict) else {}
    n_nodes = _int_text(parameters.get("num_nodes"), "num_nodes")
    if n_nodes < 1 or n_nodes > limits.max_nodes_per_tree:
        raise refuse(f"{where} has {n_nodes} nodes; the limit is {limits.max_nodes_per_tree}.")
    if _int_text(parameters.get("num_deleted", "0"), "num_deleted") != 0:
        raise refuse(f"{where} has deleted nodes; re-export the model.")
    if _int_text(parameters.get("size_leaf_vector", "1"), "size_leaf_vector") > 1:
        raise refuse(f"{where} has vector leaves; multi-target trees are not accepted.")
    if _int_text(parameters.get("num_feature", num_feature), "num_feature") != num_feature:
        raise refuse(f"{where} declares another number of features than the model.")
    arrays = {
        name: _int_array(tree.get(name), f"{where}: {name}", n_nodes) for name in NODE_INT_ARRAYS
    }
    for name in NODE_FLOAT_ARRAYS:
        _finite_array(tree.get(name), f"{where}: {name}", n_nodes)
    if np.any(arrays["split_type"] != 0) or any(
        len(tree.get(name, [])) for name in CATEGORY_ARRAYS
    ):
        raise refuse(f"{where} uses categorical splits; encode features as numbers.")
    if np.any((arrays["default_left"] != 0) & (arrays["default_left"] != 1)):
        raise refuse(f"{where}: default_left must hold 0 or 1 only.")
    features = arrays["split_indices"]
    if features.min() < 0 or features.max() >= num_feature:
        raise refuse(
            f"{where} splits on feature {int(features.max())}, but the model reads only "
            f"{num_feature} features."
        )
    return check_binary_tree(
        arrays["left_children"],
        arrays["right_children"],
        where=where,
        max_depth=limits.max_depth,
        parents=arrays["parents"],
        root_parent=ROOT_PARENT,
    )


def _int_array(value, name: str, length: int | None) -> np.ndarray:
    array = _array(value, name, length)
    if array.dtype.kind not in "iu":
        raise refuse(f"{name} must hold integers only.")
    return array.astype(np.int64)


def _finite_array(value, name: str, length: int) -> np.ndarray:
    array = _array(value, name, length)
    if array.dtype.kind not in "iuf" or not np.all(np.isfinite(array)):
        raise refuse(f"{name} must hold finite numbers only.")
    return array


def _array(value, name: str, length: int | None) -> np.ndarray:
    if not isinstance(value, (list, np.ndarray)) or any(
        isinstance(item, bool) for item in value[:1]
    ):
        raise refuse(f"{name} is missing or is not a list of numbers.")
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError):
        raise refuse(f"{name} is not a list of numbers.") from None
    if array.ndim != 1 or (length is not None and len(array) != length):
        raise refuse(f"{name} has {len(array)} entries; expected {length}.")
    if array.dtype == object:
        raise refuse(f"{name} holds numbers out of range.")
    return array
