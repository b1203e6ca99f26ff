"""Native load, predict and ONNX conversion of a model, for the sandbox child only (``workers.modelio.child``).

Never call these in a long-lived process: even a validated model is run by native code.
Each predictor returns ``(n_examples, n_classes)`` float64 probabilities whose columns are the
federation's classes 0..n_classes-1 (zero for classes the model does not know).
:func:`onnx_conversion` writes an XGBoost or safetensors model as ONNX (its *ONNX twin*, so that a buyer runs it
with onnxruntime alone), loaded as its predictor loads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from workers.modelio.base import ModelFormat, check_classes, refuse, widened_probabilities

#: An XGBoost objective whose booster is converted as another: the one whose outputs are the probabilities the
#: predictor gives (softmax of a ``multi:softmax`` booster's margins; ``reg:logistic`` read as a binary classifier).
PROBABILITY_OBJECTIVES = {"multi:softmax": "multi:softprob", "reg:logistic": "binary:logistic"}


def predict_probabilities(
    data: bytes, model_format: ModelFormat, features: np.ndarray, *, n_classes: int
) -> np.ndarray:
    """Probabilities of every federation class for every row of ``features`` (float32)."""
    return probability_predictor(data, model_format, n_classes=n_classes)(features)


def probability_predictor(
    data: bytes, model_format: ModelFormat, *, n_classes: int
) -> Callable[[np.ndarray], np.ndarray]:
    """The model loaded once, as a function of float32 ``features`` giving :func:`predict_probabilities`' result
    (a warm sandbox session, ``workers.modelio.session_child``, keeps one between calls)."""
    loaders = {
        ModelFormat.ONNX: _load_onnx,
        ModelFormat.XGBOOST_JSON: _load_xgboost,
        ModelFormat.XGBOOST_UBJSON: _load_xgboost,
        ModelFormat.SAFETENSORS: _load_safetensors,
    }
    predict = loaders[model_format](data, n_classes)

    def probabilities_of(features: np.ndarray) -> np.ndarray:
        classes, probabilities = predict(features)
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if probabilities.shape != (len(features), len(classes)):
            raise refuse(
                f"The model returned outputs of shape {probabilities.shape}; expected "
                f"{(len(features), len(classes))}."
            )
        if not np.all(np.isfinite(probabilities)):
            raise refuse("The model predicted NaN or infinite probabilities.")
        return widened_probabilities(
            probabilities, classes=check_classes(list(classes), n_classes), n_classes=n_classes
        )

    return probabilities_of


def _load_onnx(data: bytes, n_classes: int):
    import onnxruntime

    from workers.modelio.onnx_checks import (
        CLASSIFIER_OPERATORS,
        classifier_labels,
        load_onnx_model,
        probability_output_name,
    )

    model = load_onnx_model(data)
    classifiers = [node for node in model.graph.node if node.op_type in CLASSIFIER_OPERATORS]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        data, sess_options=options, providers=["CPUExecutionProvider"]
    )
    input_name = session.get_inputs()[0].name
    if classifiers:
        classes = classifier_labels(classifiers)
        output = probability_output_name(model)

        def classifier(features):
            (probabilities,) = session.run([output], {input_name: features})
            return classes, probabilities

        return classifier

    def network(features):
        (logits,) = session.run(None, {input_name: features})
        return list(range(n_classes)), _softmax(np.asarray(logits, dtype=np.float64))

    return network


def onnx_conversion(data: bytes, model_format: ModelFormat, *, n_features: int) -> bytes:
    """The ONNX twin of an XGBoost or safetensors model reading ``n_features`` features: onnxmltools for a
    booster (written with the objective whose probabilities its predictor gives: :data:`PROBABILITY_OBJECTIVES`), the
    TorchScript exporter for a zoo network (its output is the logits). The caller compares the twin's
    probabilities with the model's own before using it."""
    from workers.modelio import export

    if model_format in (ModelFormat.XGBOOST_JSON, ModelFormat.XGBOOST_UBJSON):
        booster, objective = _booster(data)
        if objective in PROBABILITY_OBJECTIVES:
            booster.set_param({"objective": PROBABILITY_OBJECTIVES[objective]})
        return export.export_xgboost_onnx(booster, n_features)
    if model_format == ModelFormat.SAFETENSORS:
        return export.export_torch_onnx(_network(data)[0], n_features)
    raise refuse(f"A {model_format} model has no ONNX conversion.")


def _booster(data: bytes):
    """The XGBoost booster of ``data`` without feature names (the federation's matrix has none), and its objective."""
    import xgboost

    booster = xgboost.Booster(params={"nthread": 1})
    booster.load_model(bytearray(data))
    booster.feature_names = None
    booster.feature_types = None
    return booster, json.loads(booster.save_config())["learner"]["objective"]["name"]


def _load_xgboost(data: bytes, n_classes: int):
    import xgboost

    booster, objective = _booster(data)
    config = json.loads(booster.save_config())["learner"]
    if objective not in ("binary:logistic", "reg:logistic", "multi:softprob", "multi:softmax"):
        raise refuse(f"The XGBoost objective {objective!r} is not accepted.")
    num_class = int(config["learner_model_param"].get("num_class", 0) or 0)

    def predict(features):
        matrix = xgboost.DMatrix(features, nthread=1)
        if objective in ("binary:logistic", "reg:logistic"):
            positive = booster.predict(matrix).astype(np.float64).reshape(-1)
            return [0, 1], np.column_stack([1.0 - positive, positive])
        if objective == "multi:softprob":
            return list(range(num_class)), booster.predict(matrix).reshape(len(features), num_class)
        margins = booster.predict(matrix, output_margin=True).reshape(len(features), num_class)
        return list(range(num_class)), _softmax(margins.astype(np.float64))

    return predict


def _network(data: bytes):
    """The zoo module of a safetensors file with its weights loaded, in eval mode, and its spec."""
    import torch
    from safetensors.torch import load

    from workers.modelio.base import ModelLimits
    from workers.modelio.safetensors_checks import read_header, spec_of
    from workers.zoo import build_module

    torch.set_num_threads(1)
    spec = spec_of(read_header(data, ModelLimits(max_header_bytes=len(data)))[0])
    module = build_module(spec)
    state = load(bytes(data))
    if not all(bool(torch.isfinite(tensor).all()) for tensor in state.values()):
        raise refuse("The state dict holds NaN or infinite values.")
    module.load_state_dict(state, strict=True)
    module.eval()
    return module, spec


def _load_safetensors(data: bytes, n_classes: int):
    import torch

    module, spec = _network(data)

    def predict(features):
        with torch.no_grad():
            logits = module(torch.from_numpy(features)).double().numpy()
        return list(range(spec["n_classes"])), _softmax(logits)

    return predict


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=1, keepdims=True)
