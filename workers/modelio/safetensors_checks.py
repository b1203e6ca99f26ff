"""Static validation of torch safetensors state dicts for a zoo architecture.

The header (8-byte little-endian length, then JSON) is parsed here, never by a native library;
the zoo spec travels in ``__metadata__["spec"]``. The expected tensor names and shapes come from
building the zoo module on torch's ``meta`` device, which allocates no weights.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from workers.modelio.base import ModelFormat, ModelInfo, ModelLimits, refuse


def read_header(data: bytes, limits: ModelLimits) -> tuple[dict, int]:
    """The safetensors JSON header and the offset where tensor data starts."""
    if len(data) < 8:
        raise refuse("The safetensors file is too short to have a header.")
    (header_length,) = struct.unpack("<Q", data[:8])
    if header_length > limits.max_header_bytes:
        raise refuse(
            f"The safetensors header takes {header_length} bytes; the limit is {limits.max_header_bytes}."
        )
    if 8 + header_length > len(data):
        raise refuse("The safetensors header runs past the end of the file; the file is damaged.")
    try:
        header = json.loads(data[8 : 8 + header_length])
    except (ValueError, RecursionError):
        raise refuse("The safetensors header is not valid JSON; the file is damaged.") from None
    if not isinstance(header, dict):
        raise refuse("The safetensors header must be a JSON object.")
    return header, 8 + header_length


def spec_of(header: dict) -> dict:
    """The zoo spec stored in the header's metadata."""
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("spec"), str):
        raise refuse(
            "The safetensors file has no zoo spec; save it with metadata={'spec': json.dumps(spec)} "
            "(see the silo guide)."
        )
    try:
        spec = json.loads(metadata["spec"])
    except (ValueError, RecursionError):
        raise refuse("The zoo spec in the safetensors metadata is not valid JSON.") from None
    if not isinstance(spec, dict):
        raise refuse("The zoo spec in the safetensors metadata must be a JSON object.")
    return spec


def inspect_safetensors(
    data: bytes, *, n_features: int, n_classes: int, limits: ModelLimits
) -> ModelInfo:
    """Validate a safetensors state dict statically; see ``inspect_model``."""
    header, data_start = read_header(data, limits)
    spec = spec_of(header)
    expected = expected_shapes(spec, n_features=n_features, n_classes=n_classes, limits=limits)
    tensors = {name: entry for name, entry in header.items() if name != "__metadata__"}
    missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or extra:
        raise refuse(
            f"The state dict does not match the spec's {spec['architecture']}: missing tensors "
            f"{missing or 'none'}, unexpected tensors {extra or 'none'}."
        )
    spans = sorted(
        _check_entry(name, tensors[name], expected[name], len(data) - data_start)
        for name in tensors
    )
    _check_spans(spans, len(data) - data_start)
    for begin, end, name in spans:
        values = np.frombuffer(
            data, dtype="<f4", count=(end - begin) // 4, offset=data_start + begin
        )
        if not np.all(np.isfinite(values)):
            raise refuse(f"The tensor {name!r} holds NaN or infinite values.")
    n_parameters = sum(math.prod(shape) for shape in expected.values())
    return ModelInfo(
        format=ModelFormat.SAFETENSORS,
        n_features=n_features,
        classes=tuple(range(n_classes)),
        family=spec["architecture"],
        detail={"n_parameters": n_parameters, "spec": spec},
    )


def expected_shapes(
    spec: dict, *, n_features: int, n_classes: int, limits: ModelLimits
) -> dict[str, tuple]:
    """Tensor name → shape of the zoo module the spec describes, refused if it does not fit the federation."""
    import torch

    from workers.zoo import SpecError, build_module, n_features_of

    try:
        with torch.device("meta"):
            module = build_module(spec)
        spec_features = n_features_of(spec)
    except (SpecError, KeyError, TypeError, ValueError) as error:
        raise refuse(f"The zoo spec is not valid: {error}") from None
    if spec_features != n_features:
        raise refuse(
            f"The model expects {spec_features} features but the federation's public data has {n_features}."
        )
    if spec["n_classes"] != n_classes:
        raise refuse(
            f"The model has {spec['n_classes']} classes but the federation has {n_classes}."
        )
    shapes = {name: tuple(tensor.shape) for name, tensor in module.state_dict().items()}
    n_parameters = sum(math.prod(shape) for shape in shapes.values())
    if n_parameters > limits.max_parameters:
        raise refuse(
            f"The model has {n_parameters} parameters; the limit is {limits.max_parameters}."
        )
    return shapes


def _check_entry(name: str, entry, shape: tuple, data_length: int) -> tuple[int, int, str]:
    if not isinstance(entry, dict):
        raise refuse(f"The safetensors header entry for {name!r} is damaged.")
    if entry.get("dtype") != "F32":
        raise refuse(f"The tensor {name!r} is {entry.get('dtype')}; save every tensor as float32.")
    if entry.get("shape") != list(shape):
        raise refuse(
            f"The tensor {name!r} has shape {entry.get('shape')}; the spec needs {list(shape)}."
        )
    offsets = entry.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(value) is int for value in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_length
        or offsets[1] - offsets[0] != 4 * math.prod(shape)
    ):
        raise refuse(
            f"The tensor {name!r} has data offsets that do not fit its shape; the file is damaged."
        )
    return offsets[0], offsets[1], name


def _check_spans(spans: list, data_length: int) -> None:
    position = 0
    for begin, end, name in spans:
        if begin != position:
            raise refuse(
                f"The tensor {name!r} overlaps another or leaves a gap; the file is damaged."
            )
        position = end
    if position != data_length:
        raise refuse("The safetensors file has bytes after its last tensor; the file is damaged.")
