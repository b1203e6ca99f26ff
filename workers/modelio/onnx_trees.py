"""Structural checks of ONNX ``TreeEnsembleClassifier`` / ``TreeEnsembleRegressor`` attribute arrays.

The trees live in parallel arrays (``nodes_treeids``, ``nodes_nodeids``, ``nodes_truenodeids``, …);
each tree must be contiguous, start at node id 0, and be a proper binary tree whose splits read
existing features at finite thresholds.
"""

from __future__ import annotations

import numpy as np

from workers.modelio.base import ModelLimits, refuse
from workers.modelio.onnx_tensors import attributes_of
from workers.modelio.trees import LEAF, check_binary_tree

MODES = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "LEAF"}
NODE_ARRAYS = (
    "nodes_treeids",
    "nodes_nodeids",
    "nodes_featureids",
    "nodes_truenodeids",
    "nodes_falsenodeids",
)


def check_tree_ensemble(node, *, n_features: int, limits: ModelLimits) -> dict:
    """``{"n_trees", "max_depth"}`` of a tree-ensemble node, refused unless every tree is sound."""
    attributes = attributes_of(node)
    where = f"The ONNX {node.op_type}"
    arrays = {name: _ints(attributes.get(name), f"{where}: {name}") for name in NODE_ARRAYS}
    n_entries = len(arrays["nodes_nodeids"])
    modes = [
        mode.decode() if isinstance(mode, bytes) else mode
        for mode in attributes.get("nodes_modes", [])
    ]
    thresholds = np.asarray(attributes.get("nodes_values", []), dtype=np.float64)
    if (
        any(len(array) != n_entries for array in arrays.values())
        or len(modes) != n_entries
        or len(thresholds) != n_entries
    ):
        raise refuse(
            f"{where} has node attribute arrays of different lengths; the file is damaged."
        )
    if n_entries == 0:
        raise refuse(f"{where} has no nodes.")
    for optional in ("nodes_missing_value_tracks_true", "nodes_hitrates"):
        if optional in attributes and len(attributes[optional]) not in (0, n_entries):
            raise refuse(f"{where}: {optional} has the wrong length; the file is damaged.")
    if set(modes) - MODES:
        raise refuse(f"{where} uses unknown node modes {sorted(set(modes) - MODES)}.")
    if not np.all(np.isfinite(thresholds)):
        raise refuse(f"{where} has NaN or infinite split thresholds.")
    is_leaf = np.array([mode == "LEAF" for mode in modes])
    features = arrays["nodes_featureids"][~is_leaf]
    if features.size and (features.min() < 0 or features.max() >= n_features):
        raise refuse(
            f"{where} splits on feature {int(features.max())}, but the federation has {n_features} features."
        )
    depths, leaves = _check_trees(arrays, is_leaf, where, limits)
    _check_leaf_weights(node, attributes, leaves, where)
    return {"n_trees": len(depths), "max_depth": max(depths)}


def _check_trees(arrays: dict, is_leaf: np.ndarray, where: str, limits: ModelLimits):
    tree_ids = arrays["nodes_treeids"]
    starts = np.flatnonzero(np.r_[True, tree_ids[1:] != tree_ids[:-1]])
    if len(set(tree_ids[starts].tolist())) != len(starts):
        raise refuse(f"{where} lists the nodes of one tree in several places; the file is damaged.")
    if len(starts) > limits.max_trees:
        raise refuse(f"The model has {len(starts)} trees; the limit is {limits.max_trees}.")
    depths: list[int] = []
    leaves: set[tuple[int, int]] = set()
    for start, end in zip(starts, np.r_[starts[1:], len(tree_ids)]):
        tree_id = int(tree_ids[start])
        depths.append(
            _check_one_tree(
                arrays, is_leaf, int(start), int(end), f"{where}, tree {tree_id}", limits
            )
        )
        leaves.update(
            (tree_id, int(node_id))
            for node_id in arrays["nodes_nodeids"][start:end][is_leaf[start:end]]
        )
    return depths, leaves


def _check_one_tree(
    arrays: dict, is_leaf: np.ndarray, start: int, end: int, where: str, limits
) -> int:
    n_nodes = end - start
    if n_nodes > limits.max_nodes_per_tree:
        raise refuse(f"{where} has {n_nodes} nodes; the limit is {limits.max_nodes_per_tree}.")
    node_ids = arrays["nodes_nodeids"][start:end]
    if node_ids[0] != 0 or len(np.unique(node_ids)) != n_nodes:
        raise refuse(f"{where} must start at node id 0 and use each node id once.")
    position = {int(node_id): index for index, node_id in enumerate(node_ids)}
    leaf = is_leaf[start:end]
    left = _positions(arrays["nodes_truenodeids"][start:end], leaf, position, where)
    right = _positions(arrays["nodes_falsenodeids"][start:end], leaf, position, where)
    return check_binary_tree(left, right, where=where, max_depth=limits.max_depth)


def _positions(child_ids: np.ndarray, leaf: np.ndarray, position: dict, where: str) -> np.ndarray:
    """Child node ids mapped to array positions within the tree (leaves get -1)."""
    mapped = np.full(len(child_ids), LEAF, dtype=np.int64)
    for index in np.flatnonzero(~leaf):
        child = int(child_ids[index])
        if child not in position:
            raise refuse(
                f"{where}: node {index} points to node id {child}, which the tree does not have."
            )
        mapped[index] = position[child]
    return mapped


def _check_leaf_weights(node, attributes: dict, leaves: set, where: str) -> None:
    prefix = "class" if node.op_type == "TreeEnsembleClassifier" else "target"
    tree_ids = _ints(attributes.get(f"{prefix}_treeids"), f"{where}: {prefix}_treeids")
    node_ids = _ints(attributes.get(f"{prefix}_nodeids"), f"{where}: {prefix}_nodeids")
    target_ids = _ints(attributes.get(f"{prefix}_ids"), f"{where}: {prefix}_ids")
    weights = np.asarray(attributes.get(f"{prefix}_weights", []), dtype=np.float64)
    if not len(tree_ids) == len(node_ids) == len(target_ids) == len(weights):
        raise refuse(f"{where} has leaf weight arrays of different lengths; the file is damaged.")
    if not np.all(np.isfinite(weights)):
        raise refuse(f"{where} has NaN or infinite leaf weights.")
    base_values = np.asarray(attributes.get("base_values", []), dtype=np.float64)
    if not np.all(np.isfinite(base_values)):
        raise refuse(f"{where} has NaN or infinite base values.")
    missing = next(
        ((t, n) for t, n in zip(tree_ids.tolist(), node_ids.tolist()) if (t, n) not in leaves), None
    )
    if missing:
        raise refuse(
            f"{where} puts a leaf weight on node {missing[1]} of tree {missing[0]}, which is not a leaf."
        )
    n_targets = attributes.get("n_targets")
    if prefix == "target" and (
        target_ids.size and (target_ids.min() < 0 or target_ids.max() >= (n_targets or 1))
    ):
        raise refuse(f"{where} writes to an output it does not have.")


def tree_ensemble_classes(node, n_labels: int) -> None:
    """Refuse class ids outside the classifier's declared labels."""
    class_ids = _ints(attributes_of(node).get("class_ids"), f"The ONNX {node.op_type}: class_ids")
    if class_ids.size and (class_ids.min() < 0 or class_ids.max() >= max(n_labels, 2)):
        raise refuse(
            f"The ONNX {node.op_type} writes to class {int(class_ids.max())}, which it does not declare."
        )


def _ints(values, name: str) -> np.ndarray:
    if values is None:
        raise refuse(f"{name} is missing; the file is damaged.")
    try:
        return np.asarray(list(values), dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise refuse(f"{name} must hold integers.") from None
