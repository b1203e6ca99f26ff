"""Safe model I/O: identify, validate and (in a sandboxed child) run uploaded models.

Accepted: ONNX with an operator allow-list, XGBoost JSON/UBJSON after structural validation,
and torch safetensors state dicts for a zoo architecture. Pickle and its relatives are refused
and never deserialised.
"""

from workers.modelio.base import ModelFormat, ModelInfo, ModelLimits, RefusedModelError
from workers.modelio.identify import identify_format
from workers.modelio.sandbox import SandboxLimits, SandboxOutcome, predict_in_sandbox
from workers.modelio.validate import inspect_model

__all__ = ["ModelFormat", "ModelInfo", "ModelLimits", "RefusedModelError", "SandboxLimits", "SandboxOutcome",
           "identify_format", "inspect_model", "predict_in_sandbox"]
