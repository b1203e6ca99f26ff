"""Files of a global model: its native safe format and ONNX, or a bundle zip for an ensemble.

Server-trained scikit-learn models → ``skops`` + ``onnx``; XGBoost → ``xgboost-json`` + ``onnx``; torch zoo
networks → ``safetensors`` (zoo spec in the metadata) + ``onnx``; kernel-distilled students (Guha eq. 3) →
``kernel_npz`` (arrays ``support_vectors``, ``dual_coef``, ``gamma``, ``temperature``: probabilities are
``softmax(exp(−gamma ‖x − support‖²) @ dual_coef / temperature)``) + ``onnx``; ensembles → ``bundle`` (a zip of the member
files with ``manifest.json``). The engines wrap the final model in
:class:`workers.learners.AlignedClassifier`; what is exported is the fitted inner estimator, which reads the
federation's classes ``0 .. K-1`` directly when the final model saw every class.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from workers.learners.aligned import estimator_on_every_class
from workers.modelio.base import ArtifactFormat
from workers.modelio.families import ModelFamily, estimator_family


@dataclass(frozen=True)
class ExportedFile:
    role: str  # "native" or "portable"
    format: str
    filename: str
    data: bytes


FINAL_MODEL_REFUSAL = (
    "The final model was trained on examples of classes {trained_on} only, not all {n_classes}; query more "
    "public examples or use less noise so that every class is labelled."
)


def model_family_of(model) -> str:
    """The family of a final model (an :class:`~workers.learners.AlignedClassifier`'s, of what it wraps)."""
    return estimator_family(getattr(model, "estimator_", model))


def export_global_model(model, *, n_features: int, n_classes: int) -> list[ExportedFile]:
    """Native and portable files of a fitted final model; ValueError if it cannot be exported faithfully."""
    from workers.algorithms.kernel_distillation import KernelDistilledClassifier
    from workers.algorithms.kernel_onnx import kernel_student_onnx
    from workers.modelio.export import (
        export_sklearn_onnx,
        export_torch_onnx,
        export_torch_safetensors,
        export_xgboost_json,
        export_xgboost_onnx,
    )

    inner = estimator_on_every_class(model, n_classes=n_classes, refusal=FINAL_MODEL_REFUSAL)
    family = estimator_family(inner)
    if isinstance(inner, KernelDistilledClassifier):
        return [
            ExportedFile("native", "kernel_npz", "model.npz", _kernel_npz(inner)),
            ExportedFile("portable", "onnx", "model.onnx", kernel_student_onnx(inner, n_features)),
        ]
    if family == ModelFamily.XGBOOST:
        return [
            ExportedFile(
                "native", ArtifactFormat.XGBOOST_JSON, "model.json", export_xgboost_json(inner)
            ),
            ExportedFile("portable", "onnx", "model.onnx", export_xgboost_onnx(inner, n_features)),
        ]
    if hasattr(inner, "module_"):
        return [
            ExportedFile(
                "native",
                "safetensors",
                "model.safetensors",
                export_torch_safetensors(inner.module_, inner.spec_),
            ),
            ExportedFile(
                "portable", "onnx", "model.onnx", export_torch_onnx(inner.module_, n_features)
            ),
        ]
    import skops.io

    return [
        ExportedFile("native", "skops", "model.skops", skops.io.dumps(inner)),
        ExportedFile("portable", "onnx", "model.onnx", export_sklearn_onnx(inner, n_features)),
    ]


def _kernel_npz(student) -> bytes:
    buffer = io.BytesIO()
    np.savez(
        buffer,
        support_vectors=student.support_vectors_,
        dual_coef=student.dual_coef_,
        gamma=np.float64(student.gamma_),
        temperature=np.float64(student.temperature_),
    )
    return buffer.getvalue()
