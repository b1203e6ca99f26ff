"""Reusable hostile and tampered model files for tests of every layer (pure core, worker, web).

Crafted payloads: each would create ``marker`` (a path in a test's tmp dir) if it were ever
deserialised, so a test proves refusal by asserting that the marker does not exist.
Tampered trees: ``tamper_*(data, kind)`` edits one tree of a real model so that it breaks the
tree shape in the way ``kind`` names (see ``TAMPERINGS``).
"""

from __future__ import annotations

import copy
import io
import json
import pickle
import struct
from pathlib import Path

import numpy as np

ACCEPTED_EXTENSIONS = (".onnx", ".json", ".ubj", ".safetensors")
TAMPERINGS = ("child_index", "feature_index", "cycle", "two_parents")
HUGE_INDEX = 1_000_000


class CreatesMarkerWhenUnpickled:
    """Unpickling this object opens (and so creates) ``marker`` for writing."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def pickle_payload(marker: Path, protocol: int = pickle.HIGHEST_PROTOCOL) -> bytes:
    """A pickle (binary protocol) that creates ``marker`` when loaded."""
    return pickle.dumps({"model": CreatesMarkerWhenUnpickled(marker)}, protocol=protocol)


def text_pickle_payload(marker: Path) -> bytes:
    """A protocol-0 (text) pickle that creates ``marker`` when loaded."""
    return pickle_payload(marker, protocol=0)


def cloudpickle_payload(marker: Path) -> bytes:
    """A cloudpickle dump (a pickle that can carry code) that creates ``marker`` when loaded."""
    import cloudpickle

    return cloudpickle.dumps({"model": CreatesMarkerWhenUnpickled(marker)})


def joblib_payload(marker: Path, compress: int | tuple = 0) -> bytes:
    """A joblib dump, plain or compressed (e.g. ``3`` for zlib, ``("gzip", 3)``, ``("lzma", 3)``)."""
    import joblib

    buffer = io.BytesIO()
    joblib.dump({"model": CreatesMarkerWhenUnpickled(marker)}, buffer, compress=compress)
    return buffer.getvalue()


def torch_pickle_payload(marker: Path) -> bytes:
    """``torch.save`` of a state dict (a ZIP with ``data.pkl``) that creates ``marker`` when loaded unsafely."""
    import torch

    buffer = io.BytesIO()
    torch.save(
        {"layers.0.weight": torch.zeros(2, 2), "hook": CreatesMarkerWhenUnpickled(marker)}, buffer
    )
    return buffer.getvalue()


def torchscript_payload() -> bytes:
    """A TorchScript archive (code plus pickles) of a tiny linear module."""
    import torch

    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 2)), buffer)
    return buffer.getvalue()


def npy_object_payload(marker: Path) -> bytes:
    """A ``.npy`` object array holding a pickle that creates ``marker`` when loaded with allow_pickle."""
    buffer = io.BytesIO()
    array = np.empty(1, dtype=object)
    array[0] = CreatesMarkerWhenUnpickled(marker)
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npz_object_payload(marker: Path) -> bytes:
    """A ``.npz`` archive whose array is an object array holding a marker-creating pickle."""
    buffer = io.BytesIO()
    array = np.empty(1, dtype=object)
    array[0] = CreatesMarkerWhenUnpickled(marker)
    np.savez(buffer, weights=array)
    return buffer.getvalue()


def hostile_payloads(marker: Path) -> dict[str, bytes]:
    """Every hostile payload by name; all but TorchScript would create ``marker`` if deserialised."""
    return {
        "pickle": pickle_payload(marker),
        "text-pickle": text_pickle_payload(marker),
        "pickle-protocol-1": pickle_payload(marker, protocol=1),
        "cloudpickle": cloudpickle_payload(marker),
        "joblib": joblib_payload(marker),
        "joblib-zlib": joblib_payload(marker, 3),
        "joblib-gzip": joblib_payload(marker, ("gzip", 3)),
        "joblib-lzma": joblib_payload(marker, ("lzma", 3)),
        "joblib-bz2": joblib_payload(marker, ("bz2", 3)),
        "torch-pickle": torch_pickle_payload(marker),
        "torchscript": torchscript_payload(),
        "npy-object": npy_object_payload(marker),
        "npz-object": npz_object_payload(marker),
    }


# --- tampered trees -----------------------------------------------------------------------------


def tamper_xgboost_json(data: bytes, kind: str) -> bytes:
    """An XGBoost JSON model with its first deep-enough tree broken as ``kind`` says."""
    document = json.loads(data)
    _tamper_xgboost_document(document, kind)
    return json.dumps(document).encode()


def tamper_xgboost_ubjson(data: bytes, kind: str) -> bytes:
    """An XGBoost UBJSON model with its first deep-enough tree broken as ``kind`` says."""
    from workers.modelio.ubjson import decode_ubjson

    document = decode_ubjson(data)
    _tamper_xgboost_document(document, kind)
    return encode_ubjson(document)


def _tamper_xgboost_document(document: dict, kind: str) -> None:
    trees = document["learner"]["gradient_booster"]["model"]["trees"]
    tree = next(tree for tree in trees if _xgboost_left_is_internal(tree))
    left = [int(value) for value in tree["left_children"]]
    right = [int(value) for value in tree["right_children"]]
    features = [int(value) for value in tree["split_indices"]]
    inner = left[0]
    if kind == "child_index":
        left[inner] = HUGE_INDEX
    elif kind == "feature_index":
        features[0] = HUGE_INDEX
    elif kind == "cycle":
        left[inner] = 0
    elif kind == "two_parents":
        left[inner] = right[0]
    else:
        raise ValueError(f"unknown tampering {kind!r}")
    for name, values in (
        ("left_children", left),
        ("right_children", right),
        ("split_indices", features),
    ):
        original = tree[name]
        tree[name] = (
            np.asarray(values, dtype=original.dtype) if isinstance(original, np.ndarray) else values
        )


def _xgboost_left_is_internal(tree: dict) -> bool:
    left = tree["left_children"]
    return int(left[0]) != -1 and int(left[int(left[0])]) != -1


def tamper_onnx_tree(data: bytes, kind: str) -> bytes:
    """An ONNX tree-ensemble model with its first deep-enough tree broken as ``kind`` says."""
    import onnx
    from onnx import helper

    model = onnx.load_from_string(data)
    node = next(node for node in model.graph.node if node.op_type.startswith("TreeEnsemble"))
    attributes = {attribute.name: attribute for attribute in node.attribute}
    tree_ids, node_ids = (
        list(attributes["nodes_treeids"].ints),
        list(attributes["nodes_nodeids"].ints),
    )
    true_ids, false_ids = (
        list(attributes["nodes_truenodeids"].ints),
        list(attributes["nodes_falsenodeids"].ints),
    )
    features = list(attributes["nodes_featureids"].ints)
    modes = [mode.decode() for mode in attributes["nodes_modes"].strings]
    position = {
        (tree, node_id): index for index, (tree, node_id) in enumerate(zip(tree_ids, node_ids))
    }
    root = next(
        index
        for index in range(len(node_ids))
        if node_ids[index] == 0
        and modes[index] != "LEAF"
        and modes[position[(tree_ids[index], true_ids[index])]] != "LEAF"
    )
    inner = position[(tree_ids[root], true_ids[root])]
    if kind == "child_index":
        true_ids[inner] = HUGE_INDEX
    elif kind == "feature_index":
        features[root] = HUGE_INDEX
    elif kind == "cycle":
        true_ids[inner] = node_ids[root]
    elif kind == "two_parents":
        true_ids[inner] = false_ids[root]
    else:
        raise ValueError(f"unknown tampering {kind!r}")
    for name, values in (("nodes_truenodeids", true_ids), ("nodes_featureids", features)):
        attributes[name].CopyFrom(helper.make_attribute(name, values))
    return model.SerializeToString()


UBJSON_ARRAY_MARKERS = {
    "i1": b"i",
    "u1": b"U",
    "i2": b"I",
    "i4": b"l",
    "i8": b"L",
    "f4": b"d",
    "f8": b"D",
}


def encode_ubjson(value) -> bytes:
    """UBJSON bytes in XGBoost's style: numpy arrays typed, lists counted, small integers compact."""
    if isinstance(value, dict):
        items = b"".join(_ubjson_key(key) + encode_ubjson(item) for key, item in value.items())
        return b"{" + items + b"}"
    if isinstance(value, np.ndarray):
        kind = f"{value.dtype.kind}{value.dtype.itemsize}"
        return (
            b"[$"
            + UBJSON_ARRAY_MARKERS[kind]
            + b"#L"
            + struct.pack(">q", len(value))
            + value.astype(value.dtype.newbyteorder(">")).tobytes()
        )
    if isinstance(value, list):
        return (
            b"[#L" + struct.pack(">q", len(value)) + b"".join(encode_ubjson(item) for item in value)
        )
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if value is None:
        return b"Z"
    if isinstance(value, int):
        for marker, fmt in ((b"i", ">b"), (b"I", ">h"), (b"l", ">i"), (b"L", ">q")):
            try:
                return marker + struct.pack(fmt, value)
            except struct.error:
                continue
    if isinstance(value, float):
        return b"d" + struct.pack(">f", value)
    if isinstance(value, str):
        return b"S" + _ubjson_key(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _ubjson_key(text: str) -> bytes:
    encoded = text.encode()
    return b"L" + struct.pack(">q", len(encoded)) + encoded


def with_safetensors_header(data: bytes, edit) -> bytes:
    """A safetensors file whose JSON header went through ``edit(header) -> header`` (data unchanged)."""
    (length,) = struct.unpack("<Q", data[:8])
    header = edit(copy.deepcopy(json.loads(data[8 : 8 + length])))
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data[8 + length :]
