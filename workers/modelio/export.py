"""Writers of the safe formats: each returns the bytes of one self-contained file.

Which format a fitted model is exported to is decided in one place, :mod:`workers.modelio.artifact` (the one
exporter, used for global models, bundle members and silo students), which calls these writers; tests and
benchmarks call them directly to build files of a given format.
"""

from __future__ import annotations

import io
import json

FEATURES_INPUT_NAME = "features"


def export_sklearn_onnx(estimator, n_features: int) -> bytes:
    """ONNX bytes for a fitted scikit-learn classifier.

    The graph reads a float32 input named ``features`` of shape ``(n_examples, n_features)``
    and outputs ``label`` and ``probabilities`` as plain tensors (no ZipMap).
    """
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    model = to_onnx(
        estimator,
        initial_types=[(FEATURES_INPUT_NAME, FloatTensorType([None, n_features]))],
        options={"zipmap": False},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    return model.SerializeToString()


def export_xgboost_onnx(model, n_features: int) -> bytes:
    """ONNX bytes for a fitted ``XGBClassifier`` (through onnxmltools, without ZipMap)."""
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    _clear_feature_names(model)
    onnx_model = convert_xgboost(
        model, initial_types=[(FEATURES_INPUT_NAME, FloatTensorType([None, n_features]))]
    )
    _drop_zipmap(onnx_model)
    return onnx_model.SerializeToString()


def export_xgboost_json(model) -> bytes:
    """XGBoost's own JSON model format for a fitted ``XGBClassifier`` or ``Booster``.

    Clears the booster's feature names first (see ``_clear_feature_names``).
    """
    return bytes(_clear_feature_names(model).save_raw(raw_format="json"))


def export_xgboost_ubjson(model) -> bytes:
    """XGBoost's own UBJSON (binary JSON) model format for a fitted ``XGBClassifier`` or ``Booster``."""
    return bytes(_clear_feature_names(model).save_raw(raw_format="ubj"))


def export_torch_safetensors(module, spec: dict) -> bytes:
    """Safetensors bytes of a zoo module's float32 state dict, with its zoo spec in the metadata."""
    from safetensors.torch import save

    state = {
        name: tensor.detach().to("cpu").float().contiguous()
        for name, tensor in module.state_dict().items()
    }
    return save(state, metadata={"spec": json.dumps(spec)})


def export_torch_onnx(module, n_features: int) -> bytes:
    """ONNX bytes for a torch network that maps ``(n_examples, n_features)`` to logits.

    Uses the legacy TorchScript exporter (``dynamo=False``): fast, a single file, and a dynamic
    batch axis.
    """
    import torch

    buffer = io.BytesIO()
    module.eval()
    example = torch.zeros((1, n_features), dtype=torch.float32)
    torch.onnx.export(
        module,
        (example,),
        buffer,  # type: ignore[arg-type]  # any binary file
        dynamo=False,
        input_names=[FEATURES_INPUT_NAME],
        output_names=["logits"],
        opset_version=17,
        dynamic_axes={FEATURES_INPUT_NAME: {0: "batch"}, "logits": {0: "batch"}},
    )
    return buffer.getvalue()


def _clear_feature_names(model):
    """The model's booster, with its feature names and types removed in place.

    onnxmltools needs names ``f0, f1, …`` or none, and the federation's matrix has no column names.
    """
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    booster.feature_names = None
    booster.feature_types = None
    return booster


def _drop_zipmap(onnx_model) -> None:
    """Remove a trailing ZipMap so that the probabilities leave the graph as a plain tensor."""
    from onnx import TensorProto, helper

    graph = onnx_model.graph
    for node in list(graph.node):
        if node.op_type != "ZipMap":
            continue
        tensor_name = node.input[0]
        graph.node.remove(node)
        for output in graph.output:
            if output.name == node.output[0]:
                graph.output.remove(output)
                graph.output.append(
                    helper.make_tensor_value_info(tensor_name, TensorProto.FLOAT, [None, None])
                )
                break


__all__ = [
    "export_sklearn_onnx",
    "export_xgboost_onnx",
    "export_xgboost_json",
    "export_xgboost_ubjson",
    "export_torch_safetensors",
    "export_torch_onnx",
]
