"""Files of a global model: its native safe format and ONNX (:mod:`workers.modelio.artifact` decides which, by
family), or a bundle zip for an ensemble (written by the job's last step).

The engines wrap the final model in :class:`workers.learners.AlignedClassifier`; what is exported is the fitted
inner estimator, which reads the federation's classes ``0 .. K-1`` directly when the final model saw every class.

A job needs only the portable file before it finishes (the evaluation runs it in the sandbox, as a buyer would);
the native file is for buyers. :func:`export_global_model_while` evaluates the portable file from a thread while
it writes the native one: the sandbox child does the evaluation's work (the thread only waits for it), and the job
waits for whichever of the two is slower instead of for both. The native writer stays on the calling thread
because it imports libraries: imports that compile code in two threads at once trip a CPython 3.11 bug ("AST
constructor recursion depth mismatch") under pytest's assertion rewriting.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from workers.learners.aligned import estimator_on_every_class
from workers.modelio.artifact import (
    NATIVE,
    PORTABLE,
    ExportedFile,
    export_formats,
    exported_file,
    exported_files,
)
from workers.modelio.families import estimator_family

Evaluation = TypeVar("Evaluation")

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


def export_global_model_while(
    model,
    *,
    n_features: int,
    n_classes: int,
    evaluate: Callable[[ExportedFile], Evaluation],
) -> tuple[list[ExportedFile], Evaluation]:
    """The files of :func:`export_global_model` (native first) and ``evaluate(portable file)``, which runs in
    another thread (so it must not use this thread's database connection) while the native file is written;
    ValueError if the model cannot be exported faithfully. An error of ``evaluate`` or of the native writer is
    raised once both have ended."""
    inner = estimator_on_every_class(model, n_classes=n_classes, refusal=FINAL_MODEL_REFUSAL)
    formats = export_formats(inner)
    portable = exported_file(inner, formats.portable, n_features=n_features, role=PORTABLE)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="portable-evaluation") as evaluator:
        evaluation = evaluator.submit(evaluate, portable)
        native = exported_file(inner, formats.native, n_features=n_features, role=NATIVE)
        return [native, portable], evaluation.result()
