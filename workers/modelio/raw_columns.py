"""An ONNX graph that reads a federation's raw columns: the feature encoding built in front of the model.

A buyer's rows are in the federation's raw schema (the columns of its public CSV). The market's models read
encoded features (:mod:`workers.features`): the *one-hot view* (numerics standardised with the public mean and
standard deviation, a missing value 0; categoricals one-hot over the public categories, missing or unknown all
zeros) or the *ordinal view* (numerics raw, a missing value the public mean; categoricals the index of their
category, missing or unknown -1). :func:`raw_column_onnx` prepends exactly those steps to one model, or to
the weighted members of an ensemble, so that onnxruntime alone turns raw rows into the platform's predictions.

The graph has one input per column, named as the column: numerics ``tensor(double)`` of shape ``[N, 1]``
(NaN is missing), categoricals ``tensor(string)`` of shape ``[N, 1]`` (``""`` is missing). Numerics are
encoded in double precision and then rounded to float32, as :func:`workers.features.encode_features` does
(the ordinal view goes through that same float32 standardisation and back, as the market's stored matrices
do), so a tree splits the same way on the buyer's machine as on the platform. Outputs: ``probabilities``
(float ``[N, K]``, class index order) and ``label`` (the class label text, ``[N]``). A member that never saw
some classes (its classifier's labels are a subset of the federation's) is widened inside the graph before the
average: its columns go to its classes and the others are zero, as the market's sandbox aligns them. The
metadata holds the input schema and the class labels as JSON (``onefold.input_schema``,
``onefold.class_labels``).

The steps are the ones skl2onnx writes for a ``StandardScaler``/``OneHotEncoder``/``OrdinalEncoder`` column
transformer (``Sub``/``Div``, ``ai.onnx.ml.OneHotEncoder``), written here directly because the encoding's
missing-value rules are the market's, not scikit-learn's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.features import ONE_HOT_VIEW, ORDINAL_VIEW, check_view
from workers.modelio.base import check_classes

ML_DOMAIN = "ai.onnx.ml"
MIN_OPSET = 13  # Where, IsNaN, Softmax over the last axis
INPUT_SCHEMA_KEY = "onefold.input_schema"
CLASS_LABELS_KEY = "onefold.class_labels"


@dataclass(frozen=True)
class RawColumnMember:
    """One ONNX model of the global model: its bytes, its weight in the average and the view it reads."""

    data: bytes
    weight: float = 1.0
    feature_view: str = ONE_HOT_VIEW


def input_schema(spec: dict) -> list[dict]:
    """The raw graph's inputs, one per column of the feature specification, as the metadata and model card
    describe them."""
    schema = []
    for column in spec["columns"]:
        if column["type"] == "numeric":
            schema.append(
                {
                    "name": column["name"],
                    "type": "numeric",
                    "onnx_type": "tensor(double)",
                    "shape": ["N", 1],
                    "missing": "NaN",
                }
            )
        else:
            schema.append(
                {
                    "name": column["name"],
                    "type": "categorical",
                    "onnx_type": "tensor(string)",
                    "shape": ["N", 1],
                    "missing": '""',
                    "categories": list(column["categories"]),
                }
            )
    return schema


class _Graph:
    """Nodes, initializers and fresh names for the graph under construction."""

    def __init__(self):
        self.nodes, self.initializers, self._count = [], [], 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"onefold_{stem}_{self._count}"

    def constant(self, stem: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name=name))
        return name

    def node(
        self, op_type: str, inputs: list[str], stem: str, domain: str = "", **attributes
    ) -> str:
        from onnx import helper

        output = self.name(stem)
        self.nodes.append(helper.make_node(op_type, inputs, [output], domain=domain, **attributes))
        return output


def _standardised(graph: _Graph, column: dict) -> str:
    """float32 ``(x - mean) / std`` with NaN → 0, computed in double as :func:`encode_features` does."""
    name = column["name"]
    centred = graph.node(
        "Sub", [name, graph.constant("mean", np.array(column["mean"], np.float64))], "centred"
    )
    scaled = graph.node(
        "Div", [centred, graph.constant("std", np.array(column["std"], np.float64))], "scaled"
    )
    missing = graph.node("IsNaN", [name], "missing")
    filled = graph.node(
        "Where", [missing, graph.constant("zero", np.array(0.0, np.float64)), scaled], "filled"
    )
    return graph.node("Cast", [filled], "standardised", to=1)  # TensorProto.FLOAT


def _raw_again(graph: _Graph, column: dict, standardised: str) -> str:
    """The ordinal view's numeric: the float32 standardised value mapped back (as ``ordinal_from_one_hot``)."""
    wide = graph.node("Cast", [standardised], "wide", to=11)  # TensorProto.DOUBLE
    scaled = graph.node(
        "Mul", [wide, graph.constant("std", np.array(column["std"], np.float64))], "rescaled"
    )
    raw = graph.node(
        "Add", [scaled, graph.constant("mean", np.array(column["mean"], np.float64))], "raw"
    )
    return graph.node("Cast", [raw], "raw_float", to=1)


def _one_hot(graph: _Graph, column: dict) -> str:
    """``[N, K]`` float one-hot over the public categories; missing or unknown rows are all zeros."""
    encoded = graph.node(
        "OneHotEncoder",
        [column["name"]],
        "one_hot_3d",
        domain=ML_DOMAIN,
        cats_strings=list(column["categories"]),
        zeros=1,
    )
    flat = graph.node(
        "Reshape",
        [encoded, graph.constant("shape", np.array([-1, len(column["categories"])], np.int64))],
        "one_hot_2d",
    )
    return graph.node("Cast", [flat], "one_hot", to=1)


def _ordinal_code(graph: _Graph, column: dict, one_hot: str) -> str:
    """``[N, 1]`` the category's index, -1 when missing or unknown: one_hot · (0 … K-1) + Σ one_hot − 1."""
    count = len(column["categories"])
    code = graph.node(
        "MatMul",
        [one_hot, graph.constant("indices", np.arange(count, dtype=np.float32)[:, None])],
        "code",
    )
    known = graph.node(
        "MatMul", [one_hot, graph.constant("ones", np.ones((count, 1), np.float32))], "known"
    )
    shifted = graph.node("Add", [code, known], "shifted")
    return graph.node("Sub", [shifted, graph.constant("one", np.array(1.0, np.float32))], "ordinal")


def _encoded_views(graph: _Graph, spec: dict, views: set[str]) -> dict[str, str]:
    """The name of each requested view's ``[N, width]`` float matrix."""
    blocks: dict[str, list[str]] = {ONE_HOT_VIEW: [], ORDINAL_VIEW: []}
    for column in spec["columns"]:
        if column["type"] == "numeric":
            standardised = _standardised(graph, column)
            blocks[ONE_HOT_VIEW].append(standardised)
            if ORDINAL_VIEW in views:
                blocks[ORDINAL_VIEW].append(_raw_again(graph, column, standardised))
        elif not column[
            "categories"
        ]:  # an all-missing public column: nothing one-hot, always -1 ordinal
            if ORDINAL_VIEW in views:
                raise ValueError(
                    f"Column '{column['name']}' had no value in the public data; its ordinal code "
                    "cannot be written into the graph."
                )
        else:
            one_hot = _one_hot(graph, column)
            blocks[ONE_HOT_VIEW].append(one_hot)
            if ORDINAL_VIEW in views:
                blocks[ORDINAL_VIEW].append(_ordinal_code(graph, column, one_hot))
    return {view: graph.node("Concat", blocks[view], f"{view}_features", axis=1) for view in views}


def _member_probabilities(graph: _Graph, model, features: str, prefix: str, n_classes: int) -> str:
    """Splice a member's graph in (its names prefixed), reading ``features``; its ``[N, K]`` probabilities."""
    from onnx import compose

    from workers.modelio.onnx_checks import (
        CLASSIFIER_OPERATORS,
        classifier_labels,
        probability_output_name,
    )

    model = compose.add_prefix(model, prefix=prefix)
    member_graph = model.graph
    input_name = member_graph.input[0].name
    graph.nodes.append(_identity(features, input_name))
    graph.nodes.extend(member_graph.node)
    graph.initializers.extend(member_graph.initializer)
    classifiers = [node for node in member_graph.node if node.op_type in CLASSIFIER_OPERATORS]
    if not classifiers:
        # a network: its one output holds the logits of every class, in index order (checked on upload)
        probabilities = graph.node("Softmax", [member_graph.output[0].name], "softmax", axis=-1)
        return graph.node("Cast", [probabilities], "member_probabilities", to=1)
    probabilities = graph.node(
        "Cast", [probability_output_name(model)], "member_probabilities", to=1
    )
    classes = check_classes(classifier_labels(classifiers), n_classes)
    return _widened(graph, probabilities, classes, n_classes)


def _widened(graph: _Graph, probabilities: str, classes: Sequence[int], n_classes: int) -> str:
    """``[N, n_classes]`` float: the member's ``[N, len(classes)]`` probabilities with column ``j`` moved to class
    ``classes[j]`` and zeros for the classes the member never saw, as the market's sandbox aligns a classifier's
    columns by its labels (:func:`workers.modelio.native.predict_probabilities`). A zero column is padded on,
    then each federation class gathers its member's column, or the zero column: values are copied, not
    computed, so the widened probabilities are the member's own bits."""
    if list(classes) == list(range(n_classes)):
        return probabilities
    position = {label: index for index, label in enumerate(classes)}
    source_columns = np.array(
        [position.get(label, len(classes)) for label in range(n_classes)], np.int64
    )
    padded = graph.node(
        "Pad",
        [probabilities, graph.constant("pads", np.array([0, 0, 0, 1], np.int64))],
        "padded",
    )
    return graph.node(
        "Gather", [padded, graph.constant("columns", source_columns)], "widened", axis=1
    )


def _identity(source: str, target: str):
    from onnx import helper

    return helper.make_node("Identity", [source], [target])


def _opsets(models: list) -> dict[str, int]:
    versions = {"": MIN_OPSET, ML_DOMAIN: 1}
    for model in models:
        for opset in model.opset_import:
            domain = "" if opset.domain == "ai.onnx" else opset.domain
            versions[domain] = max(versions.get(domain, 0), opset.version)
    return versions


def raw_column_onnx(
    members: Sequence[RawColumnMember],
    *,
    spec: dict,
    class_labels: Sequence[str],
    description: str = "",
) -> bytes:
    """One ONNX model that reads the raw columns of ``spec`` and outputs the weighted average of the members'
    probabilities (``probabilities``, float ``[N, K]``) and the predicted class label (``label``, string ``[N]``).

    Parameters
    ----------
    members : sequence of RawColumnMember
        ONNX classifiers (or networks whose single output is logits) over the encoded features of their view.
    spec : dict
        The federation's feature specification (:func:`workers.features.infer_feature_spec`).
    class_labels : sequence of str
        The federation's class labels, in class index order.

    Raises
    ------
    ValueError
        When there is no member, a weight is not positive, or a member's class labels are not distinct classes
        of the federation.
    """
    import onnx
    from onnx import TensorProto, helper

    from workers.modelio.onnx_checks import load_onnx_model

    if not members or any(not member.weight > 0 for member in members):
        raise ValueError(
            "A raw-column model needs at least one member, each with a positive weight."
        )
    n_classes = len(class_labels)
    models = [load_onnx_model(member.data) for member in members]
    graph = _Graph()
    views = _encoded_views(graph, spec, {check_view(member.feature_view) for member in members})
    total = float(sum(member.weight for member in members))
    weighted = []
    for index, (member, model) in enumerate(zip(members, models)):
        probabilities = _member_probabilities(
            graph, model, views[member.feature_view], f"member{index}_", n_classes
        )
        weight = graph.constant("weight", np.array(member.weight / total, np.float32))
        weighted.append(graph.node("Mul", [probabilities, weight], "weighted"))
    average = weighted[0] if len(weighted) == 1 else graph.node("Sum", weighted, "sum")
    graph.nodes.append(_identity(average, "probabilities"))
    class_index = graph.node("ArgMax", ["probabilities"], "class_index", axis=1, keepdims=0)
    labels = graph.constant("class_labels", np.array(list(class_labels), dtype=object))
    graph.nodes.append(helper.make_node("Gather", [labels, class_index], ["label"], axis=0))
    inputs = [
        helper.make_tensor_value_info(
            column["name"],
            TensorProto.DOUBLE if column["type"] == "numeric" else TensorProto.STRING,
            ["N", 1],
        )
        for column in spec["columns"]
    ]
    outputs = [
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", n_classes]),
        helper.make_tensor_value_info("label", TensorProto.STRING, ["N"]),
    ]
    model = helper.make_model(
        helper.make_graph(graph.nodes, "onefold_raw_columns", inputs, outputs, graph.initializers),
        opset_imports=[
            helper.make_opsetid(domain, version) for domain, version in _opsets(models).items()
        ],
        producer_name="onefold",
        doc_string=description,
    )
    # The members' IR version, not the onnx package's newest (which onnxruntime may not read yet).
    model.ir_version = max([7, *(loaded.ir_version for loaded in models)])
    helper.set_model_props(
        model,
        {
            INPUT_SCHEMA_KEY: json.dumps(input_schema(spec)),
            CLASS_LABELS_KEY: json.dumps(list(class_labels)),
        },
    )
    onnx.checker.check_model(model)
    return model.SerializeToString()
