"""inspect_model: structural validation of tree models, ONNX graphs and safetensors state dicts."""

import json
import struct

import numpy as np
import pytest

from tests.fixtures.modelio import N_FEATURES
from tests.workers.modelio import payloads
from workers.modelio import ModelFormat, ModelLimits, RefusedModelError, inspect_model

LIMITS = ModelLimits()
TAMPER = {
    "xgboost-json": payloads.tamper_xgboost_json,
    "xgboost-ubjson": payloads.tamper_xgboost_ubjson,
    "onnx-random-forest": payloads.tamper_onnx_tree,
    "onnx-xgboost": payloads.tamper_onnx_tree,
}
REASONS = {
    "child_index": "points to (child|node id) 1000000",
    "feature_index": "splits on feature 1000000",
    "cycle": "cycle",
    "two_parents": "two parents",
}


def inspect(data, *, n_features=N_FEATURES, n_classes=2, limits=LIMITS):
    return inspect_model(data, n_features=n_features, n_classes=n_classes, limits=limits)


@pytest.mark.parametrize("model_name", sorted(TAMPER))
def test_good_tree_models_pass_with_their_classes_and_sizes(toy_tree_models, model_name):
    info = inspect(toy_tree_models[model_name])
    assert (info.n_features, info.classes) == (N_FEATURES, (0, 1))
    assert info.detail["n_trees"] == (4 if model_name == "onnx-random-forest" else 3)
    assert 1 <= info.detail["max_depth"] <= 4


@pytest.mark.parametrize("kind", payloads.TAMPERINGS)
@pytest.mark.parametrize("model_name", sorted(TAMPER))
def test_tampered_tree_is_refused_with_a_reason(toy_tree_models, model_name, kind):
    tampered = TAMPER[model_name](toy_tree_models[model_name], kind)
    with pytest.raises(RefusedModelError, match=REASONS[kind]):
        inspect(tampered)


@pytest.mark.parametrize("model_name", sorted(TAMPER))
def test_tree_model_for_another_number_of_features_is_refused(toy_tree_models, model_name):
    with pytest.raises(RefusedModelError, match="6 features|has 7"):
        inspect(toy_tree_models[model_name], n_features=7)


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        (ModelLimits(max_trees=2), "3 trees; the limit is 2"),
        (ModelLimits(max_depth=1), "deeper than 1 levels"),
        (ModelLimits(max_nodes_per_tree=3), "nodes; the limit is 3"),
        (ModelLimits(max_model_bytes=100), "bytes; the limit is 100"),
    ],
)
@pytest.mark.parametrize("model_name", ["xgboost-json", "xgboost-ubjson", "onnx-xgboost"])
def test_tree_model_over_a_limit_is_refused(toy_tree_models, model_name, limits, words):
    with pytest.raises(RefusedModelError, match=words):
        inspect(toy_tree_models[model_name], limits=limits)


def _edit_xgboost_json(data: bytes, edit) -> bytes:
    document = json.loads(data)
    edit(document["learner"])
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda learner: learner["objective"].update(name="reg:squarederror"),
            "objective 'reg:squarederror'",
        ),
        (lambda learner: learner["gradient_booster"].update(name="gblinear"), "booster 'gblinear'"),
        (
            lambda learner: learner["gradient_booster"]["model"]["trees"][0]["parents"].__setitem__(
                1, 5
            ),
            "parent",
        ),
        (
            lambda learner: learner["gradient_booster"]["model"]["trees"][0][
                "split_conditions"
            ].__setitem__(0, 1e400),
            "finite",
        ),
        (
            lambda learner: learner["gradient_booster"]["model"]["trees"][0]["left_children"].pop(),
            "entries",
        ),
        (
            lambda learner: learner["learner_model_param"].update(num_class="5"),
            "binary XGBoost model",
        ),
    ],
)
def test_xgboost_json_with_a_bad_field_is_refused(toy_tree_models, edit, words):
    with pytest.raises(RefusedModelError, match=words):
        inspect(_edit_xgboost_json(toy_tree_models["xgboost-json"], edit))


def test_truncated_ubjson_is_refused(toy_tree_models):
    with pytest.raises(RefusedModelError, match="damaged"):
        inspect(toy_tree_models["xgboost-ubjson"][:-40])


def test_ubjson_with_a_forged_huge_length_is_refused_without_allocating():
    forged = (
        b"{L"
        + struct.pack(">q", 7)
        + b"learner"
        + b"[$d#L"
        + struct.pack(">q", 2**60)
        + b"\x00" * 16
        + b"}"
    )
    with pytest.raises(RefusedModelError, match="beyond its end"):
        inspect(forged)


# --- ONNX ---------------------------------------------------------------------------------------


def _onnx_with(data: bytes, change) -> bytes:
    import onnx

    model = onnx.load_from_string(data)
    change(model)
    return model.SerializeToString()


def _external_weights(model):
    tensor = model.graph.initializer[0]
    tensor.data_location = 1
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "/etc/passwd"


def _custom_domain(model):
    from onnx import helper

    model.opset_import.append(helper.make_opsetid("com.evil", 1))
    model.graph.node.append(helper.make_node("Exec", ["logits"], ["pwned"], domain="com.evil"))


def _disallowed_operator(model):
    from onnx import helper

    model.graph.node.append(helper.make_node("RandomNormalLike", ["logits"], ["noise"]))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_external_weights, "external data file"),
        (_custom_domain, "custom operator domain 'com.evil'"),
        (_disallowed_operator, "'RandomNormalLike' is not on Onefold's allow-list"),
    ],
)
def test_onnx_network_with_forbidden_content_is_refused(toy_mlp, change, words):
    from workers.modelio.export import export_torch_onnx

    module, _, _ = toy_mlp
    with pytest.raises(RefusedModelError, match=words):
        inspect(_onnx_with(export_torch_onnx(module, N_FEATURES), change), n_classes=3)


def test_onnx_network_passes_with_the_federation_classes(toy_mlp):
    from workers.modelio.export import export_torch_onnx

    info = inspect(export_torch_onnx(toy_mlp[0], N_FEATURES), n_classes=3)
    assert (info.format, info.family, info.classes, info.detail["opset"]) == (
        ModelFormat.ONNX,
        "neural-network",
        (0, 1, 2),
        17,
    )


def test_onnx_classifier_with_zipmap_is_refused(toy_data):
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    features, binary, _ = toy_data
    with_zipmap = to_onnx(
        LogisticRegression().fit(features, binary), features[:1]
    ).SerializeToString()
    with pytest.raises(RefusedModelError, match="zipmap"):
        inspect(with_zipmap)


def test_onnx_classifier_with_classes_the_federation_lacks_is_refused(toy_data):
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx

    features, _, three = toy_data
    onnx_bytes = export_sklearn_onnx(LogisticRegression().fit(features, three), N_FEATURES)
    with pytest.raises(
        RefusedModelError, match="predicts class 2, but the federation's classes are 0 to 1"
    ):
        inspect(onnx_bytes, n_classes=2)


def test_onnx_classifier_with_string_labels_is_refused(toy_data):
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx

    features, binary, _ = toy_data
    onnx_bytes = export_sklearn_onnx(
        LogisticRegression().fit(features, np.array(["no", "yes"])[binary]), N_FEATURES
    )
    with pytest.raises(RefusedModelError, match="string class labels"):
        inspect(onnx_bytes)


# --- safetensors --------------------------------------------------------------------------------


def _retyped_as_float64(data: bytes) -> bytes:
    import torch
    from safetensors.torch import load, save

    header_length = struct.unpack("<Q", data[:8])[0]
    metadata = json.loads(data[8 : 8 + header_length])["__metadata__"]
    return (
        save({name: tensor.double() for name, tensor in load(data).items()}, metadata=metadata)
        if torch
        else b""
    )


def _with_nan(data: bytes) -> bytes:
    header_length = struct.unpack("<Q", data[:8])[0]
    return data[: 8 + header_length] + struct.pack("<f", float("nan")) + data[12 + header_length :]


def _header_edit(edit):
    return lambda data: payloads.with_safetensors_header(data, edit)


def _set_spec(**changes):
    def edit(header):
        spec = json.loads(header["__metadata__"]["spec"])
        header["__metadata__"]["spec"] = json.dumps({**spec, **changes})
        return header

    return edit


def _rename(header):
    header["layers.99.weight"] = header.pop("layers.0.weight")
    return header


def _drop(header):
    header.pop("layers.2.bias")
    return header


def _reshape(header):
    header["layers.0.bias"]["shape"] = [2, 4]
    return header


@pytest.mark.parametrize(
    ("tamper", "words"),
    [
        (_retyped_as_float64, "is F64; save every tensor as float32"),
        (_with_nan, "holds NaN or infinite values"),
        (_header_edit(_reshape), "has shape \\[2, 4\\]; the spec needs \\[8\\]"),
        (
            _header_edit(_rename),
            "missing tensors \\['layers.0.weight'\\], unexpected tensors \\['layers.99.weight'\\]",
        ),
        (_header_edit(_drop), "missing tensors \\['layers.2.bias'\\]"),
        (_header_edit(_set_spec(architecture="transformer")), "Unknown architecture 'transformer'"),
        (_header_edit(_set_spec(hidden_sizes=[0])), "between 1 and 4096"),
        (
            _header_edit(_set_spec(n_features=7)),
            "expects 7 features but the federation's public data has 6",
        ),
        (_header_edit(_set_spec(n_classes=2)), "has 2 classes but the federation has 3"),
        (
            _header_edit(lambda header: {k: v for k, v in header.items() if k != "__metadata__"}),
            "no zoo spec",
        ),
    ],
)
def test_tampered_safetensors_is_refused_with_a_reason(toy_mlp, tamper, words):
    with pytest.raises(RefusedModelError, match=words):
        inspect(tamper(toy_mlp[2]), n_classes=3)


def test_good_safetensors_passes_with_its_parameter_count(toy_mlp):
    info = inspect(toy_mlp[2], n_classes=3)
    assert (info.format, info.family, info.classes, info.detail["n_parameters"]) == (
        ModelFormat.SAFETENSORS,
        "mlp",
        (0, 1, 2),
        6 * 8 + 8 + 8 * 3 + 3,
    )


def test_safetensors_over_the_parameter_limit_is_refused(toy_mlp):
    with pytest.raises(RefusedModelError, match="83 parameters; the limit is 50"):
        inspect(toy_mlp[2], n_classes=3, limits=ModelLimits(max_parameters=50))


def test_safetensors_with_an_oversized_header_is_refused():
    forged = struct.pack("<Q", 10**12) + b'{"a": 1}'
    with pytest.raises(RefusedModelError):
        inspect(forged, n_classes=3)


def test_onnx_network_with_another_number_of_classes_is_refused(toy_mlp):
    from workers.modelio.export import export_torch_onnx

    with pytest.raises(RefusedModelError, match="has 3 classes but the federation has 4"):
        inspect(export_torch_onnx(toy_mlp[0], N_FEATURES), n_classes=4)
