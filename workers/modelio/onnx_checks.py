"""Static validation of ONNX models: operator allow-list, no external data, size caps, tree shapes.

The allow-list holds what skl2onnx (random forests, gradient boosting, logistic regression),
onnxmltools (XGBoost) and ``torch.onnx`` (the zoo's MLP and CNN) export; nothing with
subgraphs, functions, custom domains or file access.
"""

from __future__ import annotations

import numpy as np

from workers.modelio.base import (
    EXPORT_ADVICE,
    ModelFormat,
    ModelInfo,
    ModelLimits,
    check_classes,
    refuse,
)
from workers.modelio.onnx_tensors import FLOAT_TYPES, attributes_of, tensor_values
from workers.modelio.onnx_trees import check_tree_ensemble, tree_ensemble_classes

ALLOWED_OPERATORS = {
    "": {
        "Gemm",
        "MatMul",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Relu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Exp",
        "Conv",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "BatchNormalization",
        "Dropout",
        "Reshape",
        "Flatten",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Concat",
        "Slice",
        "Shape",
        "Gather",
        "Cast",
        "Identity",
        "Constant",
        "ArgMax",
        "ReduceSum",
        "ReduceMax",
        "Clip",
    },
    "ai.onnx.ml": {
        "TreeEnsembleClassifier",
        "TreeEnsembleRegressor",
        "LinearClassifier",
        "LinearRegressor",
        "Normalizer",
        "Scaler",
        "ArrayFeatureExtractor",
    },
}
DOMAIN_ALIASES = {"ai.onnx": ""}
CLASSIFIER_OPERATORS = {"TreeEnsembleClassifier", "LinearClassifier"}
GRAPH_ATTRIBUTE_TYPES = {5, 10}  # AttributeProto.GRAPH, AttributeProto.GRAPHS


def load_onnx_model(data: bytes):
    """The parsed ``ModelProto`` (protobuf only; nothing runs)."""
    from google.protobuf.message import DecodeError
    from onnx import ModelProto

    try:
        return ModelProto.FromString(data)
    except (DecodeError, ValueError, RuntimeError):
        raise refuse("The ONNX model could not be parsed; the file is damaged.") from None


def inspect_onnx(data: bytes, *, n_features: int, n_classes: int, limits: ModelLimits) -> ModelInfo:
    """Validate an ONNX model statically; see ``inspect_model``."""
    model = load_onnx_model(data)
    graph = model.graph
    _check_opsets(model)
    if len(model.training_info):
        raise refuse(
            "The ONNX model carries training graphs; export an inference-only model. "
            + EXPORT_ADVICE
        )
    if len(model.functions):
        raise refuse(
            "The ONNX model defines its own functions; Onefold accepts plain graphs only. "
            + EXPORT_ADVICE
        )
    if len(graph.node) > limits.max_onnx_nodes:
        raise refuse(
            f"The ONNX model has {len(graph.node)} nodes; the limit is {limits.max_onnx_nodes}."
        )
    _check_tensors(graph, limits)
    for node in graph.node:
        _check_node(node)
    _check_input(graph, n_features)
    classifiers = [node for node in graph.node if node.op_type in CLASSIFIER_OPERATORS]
    trees = [node for node in graph.node if node.op_type.startswith("TreeEnsemble")]
    for node in graph.node:
        if node.op_type in ("LinearClassifier", "LinearRegressor", "Scaler"):
            _check_linear(node, n_features)
    tree_detail = [
        check_tree_ensemble(node, n_features=n_features, limits=limits) for node in trees
    ]
    detail = {
        "opset": _opset(model, ("", "ai.onnx")),
        "ml_opset": _opset(model, ("ai.onnx.ml",)),
        "n_nodes": len(graph.node),
        "n_trees": sum(part["n_trees"] for part in tree_detail),
        "max_depth": max((part["max_depth"] for part in tree_detail), default=0),
    }
    if classifiers:
        classes = check_classes(classifier_labels(classifiers), n_classes)
        detail["output"] = probability_output_name(model)
        family = "tree-ensemble" if trees else "linear"
    else:
        classes = tuple(range(n_classes))
        detail["output"] = _logits_output_name(graph, n_classes)
        family = "neural-network"
    return ModelInfo(
        format=ModelFormat.ONNX,
        n_features=n_features,
        classes=classes,
        family=family,
        detail=detail,
    )


def _check_opsets(model) -> None:
    for opset in model.opset_import:
        domain = DOMAIN_ALIASES.get(opset.domain, opset.domain)
        if domain not in ALLOWED_OPERATORS:
            raise refuse(
                f"The ONNX model uses the custom operator domain {opset.domain!r}; only the standard "
                "domains are accepted. " + EXPORT_ADVICE
            )


def _check_node(node) -> None:
    domain = DOMAIN_ALIASES.get(node.domain, node.domain)
    if domain not in ALLOWED_OPERATORS:
        raise refuse(
            f"The ONNX model uses the custom operator domain {node.domain!r}; only the standard "
            "domains are accepted. " + EXPORT_ADVICE
        )
    if node.op_type == "ZipMap":
        raise refuse(
            "The ONNX model ends in a ZipMap; export it with options={'zipmap': False} so that "
            "probabilities come out as a tensor."
        )
    if node.op_type not in ALLOWED_OPERATORS[domain]:
        raise refuse(
            f"The ONNX operator {node.op_type!r} is not on Onefold's allow-list; export a random forest, "
            "gradient boosting, logistic regression, XGBoost or zoo network model."
        )
    for attribute in node.attribute:
        if (
            attribute.type in GRAPH_ATTRIBUTE_TYPES
            or attribute.HasField("g")
            or len(attribute.graphs)
        ):
            raise refuse("The ONNX model contains subgraphs; Onefold accepts plain graphs only.")


def _check_tensors(graph, limits: ModelLimits) -> None:
    tensors = list(graph.initializer) + [sparse.values for sparse in graph.sparse_initializer]
    for node in graph.node:
        for attribute in node.attribute:
            tensors += ([attribute.t] if attribute.HasField("t") else []) + list(attribute.tensors)
            if attribute.HasField("sparse_tensor"):
                tensors.append(attribute.sparse_tensor.values)
    total_bytes = 0
    for tensor in tensors:
        if tensor.data_location == 1 or len(tensor.external_data):
            raise refuse(
                "The ONNX model keeps weights in an external data file; export it as a single file "
                "(external_data=False)."
            )
        total_bytes += tensor.ByteSize()
    if total_bytes > limits.max_onnx_initializer_bytes:
        raise refuse(
            f"The ONNX model's weights take {total_bytes} bytes; the limit is "
            f"{limits.max_onnx_initializer_bytes}."
        )
    for tensor in tensors:
        if tensor.data_type in FLOAT_TYPES and not np.all(np.isfinite(tensor_values(tensor))):
            raise refuse(f"The ONNX weight tensor {tensor.name!r} holds NaN or infinite values.")


def _check_input(graph, n_features: int) -> None:
    initializer_names = {tensor.name for tensor in graph.initializer}
    inputs = [value for value in graph.input if value.name not in initializer_names]
    if len(inputs) != 1:
        raise refuse(
            f"The ONNX model has {len(inputs)} inputs; it must read one float matrix of features."
        )
    tensor_type = inputs[0].type.tensor_type
    dims = tensor_type.shape.dim
    if tensor_type.elem_type != 1 or len(dims) != 2:
        raise refuse("The ONNX model's input must be a float32 matrix (n_examples, n_features).")
    if dims[1].HasField("dim_value") and dims[1].dim_value != n_features:
        raise refuse(
            f"The model expects {dims[1].dim_value} features but the federation's public data has "
            f"{n_features}."
        )


def _check_linear(node, n_features: int) -> None:
    """Coefficients of a linear model (or scaler) must be finite and fit the features they read."""
    attributes = attributes_of(node)
    arrays = {
        name: np.asarray(attributes.get(name, []), dtype=np.float64)
        for name in ("coefficients", "intercepts", "offset", "scale")
    }
    if not all(np.all(np.isfinite(array)) for array in arrays.values()):
        raise refuse(f"The ONNX {node.op_type} has NaN or infinite coefficients.")
    if node.op_type == "Scaler":
        if len(arrays["offset"]) not in (1, n_features) or len(arrays["scale"]) not in (
            1,
            n_features,
        ):
            raise refuse("The ONNX Scaler's offset and scale do not fit the number of features.")
        return
    n_targets = max(len(arrays["intercepts"]), 1)
    if len(arrays["coefficients"]) != n_targets * n_features:
        raise refuse(
            f"The ONNX {node.op_type} has {len(arrays['coefficients'])} coefficients; "
            f"{n_features} features need {n_targets * n_features}."
        )


def classifier_labels(classifiers) -> list[int]:
    """The integer class labels the graph's classifier operators declare, in output order."""
    from onnx import helper

    label_sets = []
    for node in classifiers:
        attributes = {attribute.name: attribute for attribute in node.attribute}
        if "classlabels_strings" in attributes:
            raise refuse(
                "The ONNX classifier has string class labels; train it on the federation's integer "
                "class indices 0, 1, … instead."
            )
        label_attribute = attributes.get("classlabels_int64s") or attributes.get("classlabels_ints")
        if label_attribute is None:
            raise refuse("The ONNX classifier does not declare its class labels.")
        label_sets.append([int(label) for label in helper.get_attribute_value(label_attribute)])
        if node.op_type == "TreeEnsembleClassifier":
            tree_ensemble_classes(node, len(label_sets[-1]))
    if any(labels != label_sets[-1] for labels in label_sets):
        raise refuse("The ONNX model's classifiers disagree about the class labels.")
    return label_sets[-1]


def probability_output_name(model) -> str:
    """Name of the float probability output of an ONNX classifier graph."""
    floats = [
        output.name
        for output in model.graph.output
        if output.type.tensor_type.elem_type in FLOAT_TYPES
    ]
    if len(floats) != 1:
        raise refuse(
            "The ONNX classifier must output exactly one float tensor of probabilities; export it with "
            "options={'zipmap': False}."
        )
    return floats[0]


def _logits_output_name(graph, n_classes: int) -> str:
    if len(graph.output) != 1 or graph.output[0].type.tensor_type.elem_type not in FLOAT_TYPES:
        raise refuse("The ONNX network must have exactly one float output, its logits.")
    dims = graph.output[0].type.tensor_type.shape.dim
    if len(dims) == 2 and dims[1].HasField("dim_value") and dims[1].dim_value != n_classes:
        raise refuse(
            f"The model has {dims[1].dim_value} classes but the federation has {n_classes}."
        )
    return graph.output[0].name


def _opset(model, domains: tuple[str, ...]) -> int:
    return next((opset.version for opset in model.opset_import if opset.domain in domains), 0)
