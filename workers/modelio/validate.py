"""``inspect_model``: static, structural validation of an uploaded model; no native library loads it."""

from __future__ import annotations

from workers.modelio.base import ModelFormat, ModelInfo, ModelLimits, RefusedModelError, refuse
from workers.modelio.identify import identify_format


def inspect_model(
    data: bytes, *, n_features: int, n_classes: int, limits: ModelLimits
) -> ModelInfo:
    """Identify and validate a model file for a federation with ``n_features`` and ``n_classes``.

    Only parsers written for untrusted input touch the bytes here (protobuf, JSON, our UBJSON
    reader, the safetensors header); no native model library loads or runs the model.

    Returns
    -------
    ModelInfo
        Format, feature count, the federation classes the model's outputs stand for, family and
        size detail.

    Raises
    ------
    RefusedModelError
        If the format can run code, is unknown, breaks a limit, or does not fit the federation.
    """
    if len(data) > limits.max_model_bytes:
        raise refuse(
            f"The model file has {len(data)} bytes; the limit is {limits.max_model_bytes}."
        )
    model_format = identify_format(data)
    try:
        return _inspect(
            data, model_format, n_features=n_features, n_classes=n_classes, limits=limits
        )
    except RefusedModelError:
        raise
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as error:
        # Fail closed: a file our validators did not expect is refused, never passed on.
        raise refuse(
            f"The {model_format} model is malformed and could not be validated "
            f"({type(error).__name__}); re-export it with the silo toolkit."
        ) from None


def _inspect(
    data: bytes, model_format: ModelFormat, *, n_features: int, n_classes: int, limits: ModelLimits
) -> ModelInfo:
    if model_format == ModelFormat.ONNX:
        from workers.modelio.onnx_checks import inspect_onnx

        return inspect_onnx(data, n_features=n_features, n_classes=n_classes, limits=limits)
    if model_format == ModelFormat.SAFETENSORS:
        from workers.modelio.safetensors_checks import inspect_safetensors

        return inspect_safetensors(data, n_features=n_features, n_classes=n_classes, limits=limits)
    from workers.modelio.xgboost_checks import inspect_xgboost

    return inspect_xgboost(
        data, model_format, n_features=n_features, n_classes=n_classes, limits=limits
    )
