"""The one exporter of fitted models: which safe formats a model of each family is stored in, and its files.

Every model file Onefold writes from a fitted model (a job's global model, an ensemble bundle's member, a silo's
student) comes from :func:`exported_file`, and the formats come from one table keyed by family
(:mod:`workers.modelio.families`), :data:`EXPORT_FORMATS`:

==================================================  ======================  ==========
family                                              native                  portable
==================================================  ======================  ==========
xgboost                                             xgboost-json            onnx
mlp, cnn (zoo networks; the zoo spec in metadata)   safetensors             onnx
kernel (a kernel-distilled student, Guha eq. 3)     kernel_npz              onnx
decision tree, random forest, logistic regression,  skops                   onnx
any other scikit-learn classifier
==================================================  ======================  ==========

A model's *upload* format (:attr:`ExportFormats.upload`: what a bundle holds, what the market validates and
runs) is its native format when that is one the market accepts (:class:`~workers.modelio.base.ModelFormat`),
else the portable ONNX. Callers pass the fitted estimator itself, not a wrapper such as
:class:`~workers.learners.AlignedClassifier`: they decide what to do about missing classes (refuse, relabel,
widen) and then export here.

The libraries of each format are imported when a file of it is written, so that importing this module loads
none of them. A decision tree's or random forest's ONNX file is written from its trees
(:mod:`workers.modelio.tree_ensemble_onnx`), any other scikit-learn model's by skl2onnx; skops files come from
:mod:`workers.modelio.skops_writer`, which imports skops without walking every scikit-learn module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.modelio import export
from workers.modelio.base import FILE_EXTENSIONS, ArtifactFormat, ModelFormat
from workers.modelio.families import NETWORK_FAMILIES, ModelFamily, estimator_family
from workers.modelio.kernel_student import kernel_student_npz, kernel_student_onnx

NATIVE, PORTABLE = "native", "portable"
UPLOAD_FORMATS = frozenset(ModelFormat)


@dataclass(frozen=True)
class ExportFormats:
    """The formats a model of one family is exported to: its own (``native``) and the one any ONNX runtime
    reads (``portable``)."""

    native: ArtifactFormat
    portable: ArtifactFormat = ArtifactFormat.ONNX

    @property
    def upload(self) -> ArtifactFormat:
        """The format the market accepts this family in: the native one when it is an upload format."""
        return self.native if self.native in UPLOAD_FORMATS else self.portable


_SCIKIT_LEARN = ExportFormats(ArtifactFormat.SKOPS)
#: Family → formats: the one place that decides what a fitted model is exported to.
EXPORT_FORMATS: dict[str, ExportFormats] = {
    ModelFamily.XGBOOST: ExportFormats(ArtifactFormat.XGBOOST_JSON),
    ModelFamily.MLP: ExportFormats(ArtifactFormat.SAFETENSORS),
    ModelFamily.CNN: ExportFormats(ArtifactFormat.SAFETENSORS),
    ModelFamily.KERNEL: ExportFormats(ArtifactFormat.KERNEL_NPZ),
    ModelFamily.DECISION_TREE: _SCIKIT_LEARN,
    ModelFamily.RANDOM_FOREST: _SCIKIT_LEARN,
    ModelFamily.LOGISTIC_REGRESSION: _SCIKIT_LEARN,
    ModelFamily.OTHER_SKLEARN: _SCIKIT_LEARN,
}


@dataclass(frozen=True)
class ExportedFile:
    """One file of a model: its ``role`` (``"native"`` or ``"portable"``), format, file name and bytes."""

    role: str
    format: str
    filename: str
    data: bytes


def export_formats(estimator) -> ExportFormats:
    """The formats a fitted estimator is exported to, by its family (:data:`EXPORT_FORMATS`)."""
    return EXPORT_FORMATS[estimator_family(estimator)]


def exported_file(
    estimator, model_format: str, *, n_features: int, role: str = NATIVE
) -> ExportedFile:
    """The file ``model.<extension>`` of a fitted estimator in ``model_format``.

    Parameters
    ----------
    estimator
        A fitted scikit-learn classifier, ``XGBClassifier``, zoo network
        (:class:`~workers.learners.TorchClassifier`, with ``module_`` and ``spec_``) or kernel-distilled student.
    model_format
        One of :data:`EXPORT_FORMATS`' formats for the estimator's family.
    n_features
        Width of the feature matrix the model reads (the ONNX input's second axis).
    """
    family = estimator_family(estimator)
    if model_format == ArtifactFormat.ONNX:
        data = _ONNX_WRITERS.get(family, _scikit_learn_onnx)(estimator, n_features)
    elif model_format == EXPORT_FORMATS[family].native:
        data = _NATIVE_WRITERS[model_format](estimator)
    else:
        raise ValueError(f"A {family} model is not exported as {model_format}.")
    return ExportedFile(role, str(model_format), f"model.{FILE_EXTENSIONS[model_format]}", data)


def exported_files(estimator, *, n_features: int) -> list[ExportedFile]:
    """The native and the portable file of a fitted estimator (:data:`EXPORT_FORMATS`)."""
    formats = export_formats(estimator)
    return [
        exported_file(estimator, formats.native, n_features=n_features, role=NATIVE),
        exported_file(estimator, formats.portable, n_features=n_features, role=PORTABLE),
    ]


def _torch_onnx(estimator, n_features: int) -> bytes:
    return export.export_torch_onnx(estimator.module_, n_features)


def _torch_safetensors(estimator) -> bytes:
    return export.export_torch_safetensors(estimator.module_, estimator.spec_)


def _skops(estimator) -> bytes:
    # the server's global models only: the silo toolkit never writes skops
    from workers.modelio.skops_writer import skops_file

    return skops_file(estimator)


def _scikit_learn_onnx(estimator, n_features: int) -> bytes:
    """A decision tree's or random forest's trees written as ONNX directly
    (:func:`~workers.modelio.tree_ensemble_onnx.tree_ensemble_onnx`, several times faster), any other scikit-learn
    model through skl2onnx."""
    from workers.modelio.tree_ensemble_onnx import tree_ensemble_onnx, tree_ensemble_writable

    if tree_ensemble_writable(estimator):
        return tree_ensemble_onnx(estimator, n_features)
    return export.export_sklearn_onnx(estimator, n_features)


#: The ONNX writer of a family; every family not listed is a scikit-learn model (:func:`_scikit_learn_onnx`).
_ONNX_WRITERS: dict[str, Callable[..., bytes]] = {
    ModelFamily.XGBOOST: export.export_xgboost_onnx,
    ModelFamily.KERNEL: kernel_student_onnx,
    **dict.fromkeys(NETWORK_FAMILIES, _torch_onnx),
}
_NATIVE_WRITERS: dict[str, Callable[..., bytes]] = {
    ArtifactFormat.XGBOOST_JSON: export.export_xgboost_json,
    ArtifactFormat.SAFETENSORS: _torch_safetensors,
    ArtifactFormat.KERNEL_NPZ: kernel_student_npz,
    ArtifactFormat.SKOPS: _skops,
}


def bundle_exported_file(bundle: bytes) -> ExportedFile:
    """An ensemble's one file: its bundle zip (:func:`workers.modelio.bundle.bundle_write`)."""
    return ExportedFile(
        NATIVE,
        str(ArtifactFormat.BUNDLE),
        f"bundle.{FILE_EXTENSIONS[ArtifactFormat.BUNDLE]}",
        bundle,
    )
