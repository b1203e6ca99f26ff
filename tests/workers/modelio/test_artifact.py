"""The one exporter: one table decides each family's formats, and every file it writes is named and readable."""

import numpy as np
import pytest

from workers.algorithms.kernel_distillation import KernelDistilledClassifier
from workers.learners import make_learner
from workers.modelio.artifact import (
    EXPORT_FORMATS,
    bundle_exported_file,
    export_formats,
    exported_file,
    exported_files,
)
from workers.modelio.base import ArtifactFormat, ModelFormat, ModelLimits
from workers.modelio.families import ModelFamily
from workers.modelio.native import predict_probabilities
from workers.modelio.validate import inspect_model

FEATURES = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
LABELS = (FEATURES[:, 0] > 0).astype(np.int64) + (FEATURES[:, 1] > 0.5)


def fitted(family: str):
    if family == ModelFamily.KERNEL:
        teacher = np.eye(3)[LABELS]
        return KernelDistilledClassifier(gamma=0.3, ridge=1e-3).fit(FEATURES, teacher)
    params = {"epochs": 5} if family == ModelFamily.MLP else {}
    return make_learner(family, random_state=0, **params).fit(FEATURES, LABELS)


def test_every_family_has_one_row_and_its_upload_format_is_one_the_market_accepts():
    assert set(EXPORT_FORMATS) == set(ModelFamily)
    assert {family: formats.upload for family, formats in EXPORT_FORMATS.items()} == {
        ModelFamily.XGBOOST: ModelFormat.XGBOOST_JSON,
        ModelFamily.MLP: ModelFormat.SAFETENSORS,
        ModelFamily.CNN: ModelFormat.SAFETENSORS,
        ModelFamily.KERNEL: ModelFormat.ONNX,
        ModelFamily.DECISION_TREE: ModelFormat.ONNX,
        ModelFamily.RANDOM_FOREST: ModelFormat.ONNX,
        ModelFamily.LOGISTIC_REGRESSION: ModelFormat.ONNX,
        ModelFamily.OTHER_SKLEARN: ModelFormat.ONNX,
    }
    assert {formats.portable for formats in EXPORT_FORMATS.values()} == {ArtifactFormat.ONNX}


@pytest.mark.parametrize(
    "family, native",
    [
        (ModelFamily.RANDOM_FOREST, ("skops", "model.skops")),
        (ModelFamily.XGBOOST, ("xgboost-json", "model.json")),
        (ModelFamily.MLP, ("safetensors", "model.safetensors")),
        (ModelFamily.KERNEL, ("kernel_npz", "model.npz")),
    ],
)
def test_a_fitted_model_exports_to_its_native_file_and_an_onnx_that_predicts_like_it(
    family, native
):
    model = fitted(family)
    files = exported_files(model, n_features=4)
    assert [(file.role, file.format, file.filename) for file in files] == [
        ("native", *native),
        ("portable", "onnx", "model.onnx"),
    ]
    probabilities = predict_probabilities(files[1].data, ModelFormat.ONNX, FEATURES, n_classes=3)
    assert probabilities == pytest.approx(model.predict_proba(FEATURES), abs=1e-4)


@pytest.mark.parametrize("family", [ModelFamily.XGBOOST, ModelFamily.MLP, ModelFamily.KERNEL])
def test_the_upload_file_passes_the_markets_checks(family):
    model = fitted(family)
    upload = exported_file(model, export_formats(model).upload, n_features=4)
    info = inspect_model(upload.data, n_features=4, n_classes=3, limits=ModelLimits())
    assert (info.format, info.classes) == (export_formats(model).upload, (0, 1, 2))


def test_a_format_outside_the_familys_row_is_refused():
    with pytest.raises(ValueError, match="A random_forest model is not exported as xgboost-json."):
        exported_file(fitted(ModelFamily.RANDOM_FOREST), ArtifactFormat.XGBOOST_JSON, n_features=4)


def test_an_ensemble_is_one_native_bundle_zip():
    file = bundle_exported_file(b"zip")
    assert (file.role, file.format, file.filename, file.data) == (
        "native",
        "bundle",
        "bundle.zip",
        b"zip",
    )
