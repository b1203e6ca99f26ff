"""Export a silo's fitted students in the safe formats the market accepts, for the federation's classes.

A FedKT student (:class:`workers.learners.AlignedClassifier`) may have seen only some of the
federation's classes: under label skew a silo's teachers may never vote for a class, and a silo
holding one class labels every public example with it. The exported file must still speak in the
federation's class indices:

- scikit-learn and XGBoost students go to their portable format (ONNX), and the classifier node's class
  labels are rewritten from the student's own ``0 .. k-1`` to the federation classes it saw (the market
  maps ONNX classifier labels onto its columns);
- zoo networks (MLP, CNN) go to their upload format (safetensors) with ``n_classes`` widened to the
  federation's: the rows of missing classes get zero weights and a bias of ``-MISSING_CLASS_LOGIT``;
- a student that saw a single class is a constant ONNX graph whose logits favour that class.

Which file a model of a family becomes is :mod:`workers.modelio.artifact`'s (the one exporter); the
relabelling and widening are the student's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from workers.modelio.artifact import export_formats, exported_file
from workers.modelio.base import FILE_EXTENSIONS, ArtifactFormat
from workers.modelio.export import FEATURES_INPUT_NAME
from workers.modelio.families import NETWORK_FAMILIES, estimator_family

MISSING_CLASS_LOGIT = 30.0
ONNX_CLASS_ATTRIBUTES = ("classlabels_int64s", "classlabels_ints")


@dataclass(frozen=True)
class ExportedModel:
    """One model file: ``suffix`` (".onnx" or ".safetensors"), ``data`` and the market's ``model_family``."""

    suffix: str
    data: bytes
    model_family: str


def export_student(student, *, n_features: int, n_classes: int) -> ExportedModel:
    """The safe-format file of a fitted :class:`~workers.learners.AlignedClassifier`.

    Parameters
    ----------
    student : AlignedClassifier
        ``present_classes_`` are the federation class indices it was fitted on.
    n_features, n_classes : int
        Width of the federation's encoded features and number of its classes.
    """
    present = [int(label) for label in student.present_classes_]
    inner = student.estimator_
    if inner is None:
        return ExportedModel(
            _suffix(ArtifactFormat.ONNX),
            constant_class_onnx(present[0], n_features=n_features, n_classes=n_classes),
            estimator_family(student.estimator),
        )
    family = estimator_family(inner)
    if family in NETWORK_FAMILIES:
        widened = widened_classifier(inner, present, n_classes)
        exported = exported_file(widened, export_formats(widened).upload, n_features=n_features)
        return ExportedModel(_suffix(exported.format), exported.data, family)
    exported = exported_file(inner, export_formats(inner).portable, n_features=n_features)
    data = exported.data
    if present != list(range(n_classes)):
        data = relabelled_onnx(data, present)
    return ExportedModel(_suffix(exported.format), data, family)


def _suffix(model_format: str) -> str:
    return f".{FILE_EXTENSIONS[model_format]}"


def relabelled_onnx(data: bytes, present: list[int]) -> bytes:
    """ONNX bytes whose classifier nodes name the federation classes ``present`` instead of ``0 .. k-1``."""
    from onnx import ModelProto

    model = ModelProto.FromString(data)
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.name in ONNX_CLASS_ATTRIBUTES:
                labels = [present[int(index)] for index in attribute.ints]
                del attribute.ints[:]
                attribute.ints.extend(labels)
    return model.SerializeToString()


def constant_class_onnx(label: int, *, n_features: int, n_classes: int) -> bytes:
    """A graph ``features → features·0 + logits`` that predicts class ``label`` for every row."""
    from onnx import TensorProto, helper, numpy_helper

    logits = np.full((1, n_classes), -MISSING_CLASS_LOGIT, dtype=np.float32)
    logits[0, label] = MISSING_CLASS_LOGIT
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", [FEATURES_INPUT_NAME, "zeros"], ["zero_logits"]),
            helper.make_node("Add", ["zero_logits", "class_logits"], ["logits"]),
        ],
        "constant_class",
        [helper.make_tensor_value_info(FEATURES_INPUT_NAME, TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, n_classes])],
        initializer=[
            numpy_helper.from_array(np.zeros((n_features, n_classes), dtype=np.float32), "zeros"),
            numpy_helper.from_array(logits, "class_logits"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def widened_classifier(classifier, present: list[int], n_classes: int):
    """A copy of a fitted zoo network classifier whose ``module_`` and ``spec_`` are :func:`widened_network`'s."""
    widened = copy.copy(classifier)
    widened.module_, widened.spec_ = widened_network(classifier, present, n_classes)
    return widened


def widened_network(classifier, present: list[int], n_classes: int):
    """A copy of a fitted zoo network whose output layer has a row per federation class."""
    import torch

    from workers.zoo import build_module

    spec = {**classifier.spec_, "n_classes": n_classes}
    trained = classifier.module_.state_dict()
    module = build_module(spec)
    widened = module.state_dict()
    rows = torch.tensor(present)
    with torch.no_grad():
        for name, tensor in widened.items():
            if trained[name].shape == tensor.shape:
                tensor.copy_(trained[name])
            elif name.endswith("weight"):
                tensor.zero_()
                tensor[rows] = trained[name]
            else:
                tensor.fill_(-MISSING_CLASS_LOGIT)
                tensor[rows] = trained[name]
    return module, spec


__all__ = [
    "ExportedModel",
    "constant_class_onnx",
    "export_student",
    "relabelled_onnx",
    "widened_classifier",
    "widened_network",
]
