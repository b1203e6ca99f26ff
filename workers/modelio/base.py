"""The nouns of safe model I/O: formats, limits, what a validation learned, and the refusal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

EXPORT_ADVICE = "Export your model to ONNX, XGBoost JSON or safetensors (see the silo guide)."


class ModelFormat(StrEnum):
    """A model file format Onefold accepts, identified from the bytes, never from the file name."""

    ONNX = "onnx"
    XGBOOST_JSON = "xgboost-json"
    XGBOOST_UBJSON = "xgboost-ubjson"
    SAFETENSORS = "safetensors"


class ArtifactFormat(StrEnum):
    """Every format a model file is stored and downloaded in: the upload formats (:class:`ModelFormat`) and what
    the server exports besides (a scikit-learn model's skops file, a kernel student's arrays, an ensemble's
    bundle zip)."""

    ONNX = "onnx"
    XGBOOST_JSON = "xgboost-json"
    XGBOOST_UBJSON = "xgboost-ubjson"
    SAFETENSORS = "safetensors"
    SKOPS = "skops"
    KERNEL_NPZ = "kernel_npz"
    BUNDLE = "bundle"


FILE_EXTENSIONS: dict[
    str, str
] = {  # keyed by ArtifactFormat, a StrEnum: its plain names find it too
    ArtifactFormat.ONNX: "onnx",
    ArtifactFormat.XGBOOST_JSON: "json",
    ArtifactFormat.XGBOOST_UBJSON: "ubj",
    ArtifactFormat.SAFETENSORS: "safetensors",
    ArtifactFormat.SKOPS: "skops",
    ArtifactFormat.KERNEL_NPZ: "npz",
    ArtifactFormat.BUNDLE: "zip",
}
# Names a format had before it was spelt one way; global models made then are migrated (market.jobs 0006), and a
# client that still asks for the old name is answered.
LEGACY_FORMAT_NAMES = {"xgboost_json": ArtifactFormat.XGBOOST_JSON}


def artifact_format_named(name: str) -> str:
    """The format's one spelling, for a name a client may still write the old way (``xgboost_json``)."""
    return str(LEGACY_FORMAT_NAMES.get(name, name))


class RefusedModelError(ValueError):
    """A model file Onefold will not load; the message tells the uploader what to fix."""


@dataclass(frozen=True)
class ModelLimits:
    """Size caps checked from a model's metadata before any native library sees it.

    The market builds one from its settings; the defaults suit the product's own exports.
    """

    max_model_bytes: int = 100 * 2**20  # size of the whole file
    max_trees: int = 2_000  # trees in one ensemble (XGBoost, or all tree nodes of an ONNX graph)
    max_nodes_per_tree: int = 100_000
    max_depth: int = 64  # root-to-leaf edges
    max_parameters: int = 20_000_000  # torch safetensors: numbers in the zoo module's state dict
    max_onnx_nodes: int = 10_000  # operators in an ONNX graph
    max_onnx_initializer_bytes: int = 100 * 2**20  # serialised weight tensors of an ONNX graph
    max_header_bytes: int = 2**20  # safetensors JSON header


@dataclass(frozen=True)
class ModelInfo:
    """What static validation learned about a model.

    ``classes`` are the federation class indices the model's outputs stand for, in output order;
    ``family`` is ``"tree-ensemble"``, ``"linear"``, ``"xgboost"``, ``"mlp"``, ``"cnn"`` or
    ``"neural-network"``; ``detail`` holds counts such as ``n_trees``, ``max_depth``,
    ``n_parameters`` and ``opset``.
    """

    format: ModelFormat
    n_features: int
    classes: tuple[int, ...]
    family: str
    detail: dict = field(default_factory=dict)


def refuse(message: str) -> RefusedModelError:
    """A refusal to raise: ``raise refuse("...")``."""
    return RefusedModelError(message)


def check_classes(classes: list[int], n_classes: int) -> tuple[int, ...]:
    """The model's class labels, refused unless they are distinct federation classes 0..n_classes-1."""
    if len(set(classes)) != len(classes):
        raise refuse("The model lists the same class label twice.")
    outside = [label for label in classes if not 0 <= label < n_classes]
    if outside:
        raise refuse(
            f"The model predicts class {outside[0]}, but the federation's classes are 0 to {n_classes - 1}."
        )
    return tuple(int(label) for label in classes)


def widened_probabilities(
    probabilities: np.ndarray, *, classes: Sequence[int] | None, n_classes: int
) -> np.ndarray:
    """A model's probabilities ``(n_rows, len(classes))`` as ``(n_rows, n_classes)`` float64: column ``j`` at
    federation class ``classes[j]`` (every class in index order when ``classes`` is None), zero for the classes
    the model never saw. How the sandbox aligns a model's outputs, and the recipe a buyer runs on each member of
    a bundle with its manifest's ``classes`` (docs/market.md, Downloads)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    columns = list(range(n_classes)) if classes is None else [int(label) for label in classes]
    if probabilities.ndim != 2 or probabilities.shape[1] != len(columns):
        raise refuse(
            f"The model returned outputs of shape {probabilities.shape}; expected "
            f"({len(probabilities)}, {len(columns)})."
        )
    widened = np.zeros((len(probabilities), n_classes), dtype=np.float64)
    widened[:, columns] = probabilities
    return widened
