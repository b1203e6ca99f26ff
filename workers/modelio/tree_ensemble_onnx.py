"""The ONNX file of a fitted scikit-learn decision tree or random forest, written directly from its trees.

skl2onnx converts a 100-tree forest in about as long as the forest took to fit (and more on a loaded machine), most
of it walking its own converter registry and the trees node by node in Python; the ``TreeEnsembleClassifier``
operator (``ai.onnx.ml``, opset 1) holds the same trees as parallel arrays, which numpy builds from each tree's
``tree_`` arrays at once. The graph is the one skl2onnx writes (input ``features``, outputs ``label`` and
``probabilities``, no ZipMap).

The one subtlety is the thresholds. scikit-learn compares a float32 feature, widened to float64, with a float64
threshold (``x <= t``); onnxruntime compares the float32 feature with a float32 threshold. Rounding ``t`` to the
nearest float32 sends a row whose value is the float32 just above ``t`` the wrong way; the largest float32 that is
not above ``t`` (:func:`float32_thresholds`) gives every float32 input the same side as scikit-learn.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from workers.modelio.export import FEATURES_INPUT_NAME

TREE_ENSEMBLE_TYPES = (DecisionTreeClassifier, RandomForestClassifier)
ML_OPSET, ONNX_OPSET, IR_VERSION = 1, 17, 8  # what skl2onnx writes for these models


def tree_ensemble_writable(estimator) -> bool:
    """Whether :func:`tree_ensemble_onnx` writes this estimator: a fitted decision tree or random forest (exactly
    these classes) with one output and integer classes."""
    return (
        type(estimator) in TREE_ENSEMBLE_TYPES
        and getattr(estimator, "n_outputs_", None) == 1
        and np.issubdtype(np.asarray(estimator.classes_).dtype, np.integer)
    )


def float32_thresholds(thresholds: np.ndarray) -> np.ndarray:
    """The largest float32 at or below each float64 threshold.

    For every float32 ``x``, ``x <= result`` (in float32) holds exactly when ``float64(x) <= threshold``: if the
    nearest float32 rounded up, the float32 below it is taken (``np.nextafter`` toward −∞).
    """
    thresholds = np.asarray(thresholds, dtype=np.float64)
    rounded = thresholds.astype(np.float32)
    above = rounded.astype(np.float64) > thresholds
    rounded[above] = np.nextafter(rounded[above], np.float32(-np.inf))
    return rounded


def tree_ensemble_onnx(estimator, n_features: int) -> bytes:
    """ONNX bytes of a fitted ``DecisionTreeClassifier`` or ``RandomForestClassifier``
    (:func:`tree_ensemble_writable`): a float32 input ``features`` of shape ``(n_examples, n_features)``, outputs
    ``label`` (int64) and ``probabilities`` (float32, one column per class of ``classes_``), which are the mean of
    the trees' leaf class fractions, as ``predict_proba`` computes them."""
    from onnx import TensorProto, helper

    trees = [estimator] if isinstance(estimator, DecisionTreeClassifier) else estimator.estimators_
    arrays = _ensemble_arrays([tree.tree_ for tree in trees], n_classes=len(estimator.classes_))
    node = helper.make_node(
        "TreeEnsembleClassifier",
        [FEATURES_INPUT_NAME],
        ["label", "probabilities"],
        domain="ai.onnx.ml",
        classlabels_int64s=[int(label) for label in estimator.classes_],
        post_transform="NONE",
    )
    # helper.make_attribute checks every element in Python; the arrays' types are known, so they go in whole
    node.attribute.extend(_array_attribute(name, values) for name, values in arrays.items())
    graph = helper.make_graph(
        [node],
        f"ONNX({type(estimator).__name__})",
        [helper.make_tensor_value_info(FEATURES_INPUT_NAME, TensorProto.FLOAT, [None, n_features])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
            helper.make_tensor_value_info(
                "probabilities", TensorProto.FLOAT, [None, len(estimator.classes_)]
            ),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", ONNX_OPSET),
            helper.make_opsetid("ai.onnx.ml", ML_OPSET),
        ],
        ir_version=IR_VERSION,
        producer_name="onefold",
    )
    return model.SerializeToString()


def _array_attribute(name: str, values: np.ndarray):
    """An ONNX attribute holding ``values``: ints for an integer array, floats for a float one, strings for
    text."""
    from onnx import AttributeProto

    attribute = AttributeProto(name=name)
    if values.dtype.kind in "iu":
        attribute.type = AttributeProto.INTS
        attribute.ints.extend(values.tolist())
    elif values.dtype.kind == "f":
        attribute.type = AttributeProto.FLOATS
        attribute.floats.extend(values.tolist())
    else:
        attribute.type = AttributeProto.STRINGS
        attribute.strings.extend(value.encode() for value in values.tolist())
    return attribute


def _ensemble_arrays(trees: list, *, n_classes: int) -> dict:
    """The operator's node and leaf-weight attributes of ``trees`` (scikit-learn ``Tree`` objects), each leaf's
    class fractions divided by the number of trees."""
    nodes: dict[str, list] = {name: [] for name in _NODE_ATTRIBUTES}
    leaves: dict[str, list] = {name: [] for name in _LEAF_ATTRIBUTES}
    for tree_id, tree in enumerate(trees):
        _append_tree(nodes, leaves, tree, tree_id=tree_id, n_classes=n_classes, scale=len(trees))
    node_arrays = {name: np.concatenate(parts) for name, parts in nodes.items()}
    is_leaf = node_arrays.pop("is_leaf")
    return {
        **node_arrays,
        "nodes_modes": np.where(is_leaf, "LEAF", "BRANCH_LEQ"),
        "nodes_hitrates": np.ones(len(is_leaf), dtype=np.float32),
        "nodes_missing_value_tracks_true": np.zeros(len(is_leaf), dtype=np.int64),
        **{name: np.concatenate(parts) for name, parts in leaves.items()},
    }


_NODE_ATTRIBUTES = (
    "nodes_treeids",
    "nodes_nodeids",
    "nodes_featureids",
    "nodes_values",
    "nodes_truenodeids",
    "nodes_falsenodeids",
    "is_leaf",
)
_LEAF_ATTRIBUTES = ("class_treeids", "class_nodeids", "class_ids", "class_weights")


def _append_tree(nodes: dict, leaves: dict, tree, *, tree_id: int, n_classes: int, scale: int):
    """Append one tree's arrays: nodes keep scikit-learn's numbering (root 0); a leaf's children point to 0."""
    n_nodes = tree.node_count
    left, right = tree.children_left[:n_nodes], tree.children_right[:n_nodes]
    is_leaf = left == -1
    nodes["nodes_treeids"].append(np.full(n_nodes, tree_id, dtype=np.int64))
    nodes["nodes_nodeids"].append(np.arange(n_nodes, dtype=np.int64))
    nodes["nodes_featureids"].append(np.where(is_leaf, 0, tree.feature[:n_nodes]).astype(np.int64))
    nodes["nodes_values"].append(
        np.where(is_leaf, np.float32(0), float32_thresholds(tree.threshold[:n_nodes]))
    )
    nodes["nodes_truenodeids"].append(np.where(is_leaf, 0, left).astype(np.int64))
    nodes["nodes_falsenodeids"].append(np.where(is_leaf, 0, right).astype(np.int64))
    nodes["is_leaf"].append(is_leaf)
    leaf_ids = np.flatnonzero(is_leaf)
    counts = tree.value[leaf_ids, 0, :].astype(np.float64)
    fractions = counts / counts.sum(axis=1, keepdims=True) / scale
    # Two classes are written as skl2onnx writes them, one weight per leaf (the second class's fraction) on class
    # id 0: onnxruntime then outputs [1 - s, s] and the label s > 0.5. With a weight per class, it picks the label
    # by the sign of the second score instead, which is always the second class.
    columns = fractions[:, 1:] if n_classes == 2 else fractions
    per_leaf = columns.shape[1]
    leaves["class_treeids"].append(np.full(len(leaf_ids) * per_leaf, tree_id, dtype=np.int64))
    leaves["class_nodeids"].append(np.repeat(leaf_ids, per_leaf).astype(np.int64))
    leaves["class_ids"].append(np.tile(np.arange(per_leaf, dtype=np.int64), len(leaf_ids)))
    leaves["class_weights"].append(columns.reshape(-1).astype(np.float32))
