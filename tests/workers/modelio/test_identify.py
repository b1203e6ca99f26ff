"""identify_format and inspect_model refuse pickle and its relatives, whatever the file is called."""

import pytest

from tests.workers.modelio import payloads
from workers.modelio import (
    ModelFormat,
    ModelLimits,
    RefusedModelError,
    identify_format,
    inspect_model,
)

PAYLOAD_NAMES = (
    "pickle",
    "text-pickle",
    "pickle-protocol-1",
    "cloudpickle",
    "joblib",
    "joblib-zlib",
    "joblib-gzip",
    "joblib-lzma",
    "joblib-bz2",
    "torch-pickle",
    "torchscript",
    "npy-object",
    "npz-object",
)
EXPECTED_WORDS = {
    "pickle": "pickle",
    "text-pickle": "pickle",
    "pickle-protocol-1": "pickle",
    "cloudpickle": "pickle",
    "joblib": "pickle",
    "joblib-zlib": "zlib",
    "joblib-gzip": "gzip",
    "joblib-lzma": "lzma",
    "joblib-bz2": "bzip2",
    "torch-pickle": "torch.save",
    "torchscript": "TorchScript",
    "npy-object": "numpy",
    "npz-object": "npz",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    marker = tmp_path_factory.mktemp("identify") / "executed"
    return marker, payloads.hostile_payloads(marker)


@pytest.mark.parametrize("extension", payloads.ACCEPTED_EXTENSIONS)
@pytest.mark.parametrize("name", PAYLOAD_NAMES)
def test_hostile_file_is_refused_under_every_extension_and_never_executed(
    hostile, tmp_path, name, extension
):
    marker, files = hostile
    upload = tmp_path / f"model{extension}"
    upload.write_bytes(files[name])
    data = upload.read_bytes()
    with pytest.raises(RefusedModelError, match=EXPECTED_WORDS[name]):
        identify_format(data)
    with pytest.raises(RefusedModelError, match=EXPECTED_WORDS[name]):
        inspect_model(data, n_features=6, n_classes=2, limits=ModelLimits())
    assert not marker.exists()


def test_pickle_refusal_tells_the_uploader_what_to_export_instead(hostile):
    _, files = hostile
    with pytest.raises(RefusedModelError) as refusal:
        identify_format(files["pickle"])
    assert str(refusal.value) == (
        "This file is a Python pickle (protocol 5); pickles can run code when loaded, so Onefold refuses them. "
        "Export your model to ONNX, XGBoost JSON or safetensors (see the silo guide)."
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"PK\x05\x06" + bytes(18), "ZIP archive"),
        (b"\x89HDF\r\n\x1a\n" + bytes(64), "recognise"),
        (b"hello world", "recognise"),
        (b"\x28\xb5\x2f\xfd" + bytes(16), "zstandard"),
    ],
)
def test_unknown_or_archive_formats_are_refused(data, words):
    with pytest.raises(RefusedModelError, match=words):
        identify_format(data)


def test_skops_archive_is_refused_by_name(tmp_path):
    import zipfile

    path = tmp_path / "model.skops"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("schema.json", "{}")
    with pytest.raises(RefusedModelError, match="skops"):
        identify_format(path.read_bytes())


def test_accepted_formats_are_identified_from_their_bytes(toy_tree_models, toy_mlp):
    assert identify_format(toy_tree_models["xgboost-json"]) == ModelFormat.XGBOOST_JSON
    assert identify_format(toy_tree_models["xgboost-ubjson"]) == ModelFormat.XGBOOST_UBJSON
    assert identify_format(toy_tree_models["onnx-random-forest"]) == ModelFormat.ONNX
    assert identify_format(toy_tree_models["onnx-xgboost"]) == ModelFormat.ONNX
    assert identify_format(toy_mlp[2]) == ModelFormat.SAFETENSORS
