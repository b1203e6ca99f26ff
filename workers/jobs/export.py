"""Files of a global model: its native safe format and ONNX (:mod:`workers.modelio.artifact` decides which, by
family), or a bundle zip for an ensemble (written by the job's last step).

The engines wrap the final model in :class:`workers.learners.AlignedClassifier`; what is exported is the fitted
inner estimator, which reads the federation's classes ``0 .. K-1`` directly when the final model saw every class.
"""

from __future__ import annotations

from workers.learners.aligned import estimator_on_every_class
from workers.modelio.artifact import ExportedFile, exported_files
from workers.modelio.families import estimator_family

FINAL_MODEL_REFUSAL = (
    "The final model was trained on examples of classes {trained_on} only, not all {n_classes}; query more "
    "public examples or use less noise so that every class is labelled."
)


def model_family_of(model) -> str:
    """The family of a final model (an :class:`~workers.learners.AlignedClassifier`'s, of what it wraps)."""
    return estimator_family(getattr(model, "estimator_", model))


def export_global_model(model, *, n_features: int, n_classes: int) -> list[ExportedFile]:
    """Native and portable files of a fitted final model; ValueError if it cannot be exported faithfully."""
    inner = estimator_on_every_class(model, n_classes=n_classes, refusal=FINAL_MODEL_REFUSAL)
    return exported_files(inner, n_features=n_features)
