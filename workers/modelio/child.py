"""Sandbox child: ``python -m workers.modelio.child EXCHANGE_DIR``; started only by ``predict_in_sandbox``.

Sets its resource limits first, before numpy or any native library is imported (the parent uses
no ``preexec_fn``, which is unsafe in a threaded worker). Then reads ``request.json``,
``features.npy`` and ``model_<i>.bin`` from the exchange folder and writes, after each model,
``probabilities_<i>.npy`` (float64) and ``result_<i>.json`` (``{"error": ...}``), so that the
parent knows which models finished if a later one kills this process.

A request with ``"convert_to_onnx": true`` asks for each model's ONNX twin instead
(:func:`workers.modelio.native.onnx_conversion`; an ONNX model is its own twin): the twin must pass the same
structural checks and predict the model's own probabilities within :data:`CONVERSION_TOLERANCE`, else the model's
error says by how much they differ. The child then writes ``converted_<i>.onnx`` besides, and the probabilities
are the twin's.
"""

import json
import resource
import sys
from pathlib import Path

RESOURCE_LIMITS = {
    "memory_bytes": resource.RLIMIT_AS,
    "cpu_seconds": resource.RLIMIT_CPU,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}
CONVERSION_TOLERANCE = 1e-5  # largest difference in a probability between a model and its ONNX twin


def apply_resource_limits(limits: dict) -> None:
    """Lower this process's limits; they cannot be raised again by anything it later runs."""
    for name, which in RESOURCE_LIMITS.items():
        value = int(limits[name])
        hard = value + 1 if which == resource.RLIMIT_CPU else value  # SIGXCPU first, then SIGKILL
        resource.setrlimit(which, (value, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(exchange: Path) -> None:
    import gc

    import numpy as np

    from workers.modelio.base import ModelLimits, RefusedModelError

    request = json.loads((exchange / "request.json").read_text())
    features = np.load(exchange / "features.npy", allow_pickle=False)
    limits = ModelLimits(**request["model_limits"])
    for index in request["indices"]:
        data = (exchange / f"model_{index}.bin").read_bytes()
        try:
            if request.get("convert_to_onnx"):
                converted, probabilities = _convert_one(data, features, request, limits)
                (exchange / f"converted_{index}.onnx").write_bytes(converted)
            else:
                probabilities = _predict_one(data, features, request, limits)
            np.save(exchange / f"probabilities_{index}.npy", probabilities, allow_pickle=False)
            error = None
        except RefusedModelError as refusal:
            error = str(refusal)
        except Exception as failure:  # noqa: BLE001 - any native failure rejects the model, not the child
            error = describe_failure(failure)
        (exchange / f"result_{index}.json").write_text(json.dumps({"error": error}))
        gc.collect()


def _predict_one(data: bytes, features, request: dict, limits):
    from workers.modelio.identify import identify_format
    from workers.modelio.native import predict_probabilities
    from workers.modelio.validate import inspect_model

    model_format = identify_format(data)  # always: pickles are refused even when checks are skipped
    if not request["skip_structural_checks"]:
        inspect_model(
            data, n_features=features.shape[1], n_classes=request["n_classes"], limits=limits
        )
    return predict_probabilities(data, model_format, features, n_classes=request["n_classes"])


def _convert_one(data: bytes, features, request: dict, limits):
    """The model's ONNX twin and the twin's probabilities, refused unless they are the model's own."""
    from workers.modelio.base import ModelFormat, refuse
    from workers.modelio.identify import identify_format
    from workers.modelio.native import onnx_conversion

    native = _predict_one(data, features, request, limits)
    model_format = identify_format(data)
    if model_format == ModelFormat.ONNX:
        return data, native
    converted = onnx_conversion(data, model_format, n_features=features.shape[1])
    twin = _predict_one(converted, features, request, limits)
    difference = float(abs(twin - native).max())
    if not difference <= CONVERSION_TOLERANCE:
        raise refuse(
            f"The model's ONNX conversion predicts probabilities up to {difference:.3g} away from the model's "
            f"own (at most {CONVERSION_TOLERANCE:g} is accepted), so it cannot be run with onnxruntime alone."
        )
    return converted, twin


def describe_failure(failure: Exception) -> str:
    """The sentence of a model's load or prediction that raised (not a refusal: that one says it itself)."""
    if isinstance(failure, MemoryError):
        return f"The model needed more than {_memory_limit_mb()} MB of memory."
    message = str(failure)
    if any(words in message.lower() for words in ("allocat", "failed to map", "out of memory")):
        return f"The model needed more than {_memory_limit_mb()} MB of memory."
    return f"The model could not be loaded or run: {type(failure).__name__}: {message[:400]}"


def _memory_limit_mb() -> int:
    return resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20


if __name__ == "__main__":
    exchange_folder = Path(sys.argv[1])
    apply_resource_limits(
        json.loads((exchange_folder / "request.json").read_text())["sandbox_limits"]
    )
    main(exchange_folder)
