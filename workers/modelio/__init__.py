"""Safe model I/O: identify, validate and (in a sandboxed child) run uploaded models.

Accepted: ONNX with an operator allow-list, XGBoost JSON/UBJSON after structural validation,
and torch safetensors state dicts for a zoo architecture. Pickle and its relatives are refused
and never deserialised.

The names below are imported on first use (PEP 562), so that the sandbox child
(``python -m workers.modelio.child``) can set its resource limits before numpy or any native
library is loaded.
"""

from importlib import import_module

_PUBLIC = {
    "ModelFormat": "base",
    "ModelInfo": "base",
    "ModelLimits": "base",
    "RefusedModelError": "base",
    "identify_format": "identify",
    "inspect_model": "validate",
    "SandboxConfiguration": "sandbox",
    "SandboxLimits": "sandbox",
    "SandboxOutcome": "sandbox",
    "predict_in_sandbox": "sandbox",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'workers.modelio' has no attribute {name!r}")
    return getattr(import_module(f"workers.modelio.{_PUBLIC[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
