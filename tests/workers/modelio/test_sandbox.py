"""predict_in_sandbox: native loads and predictions run in a limited child; the caller always lives on."""

import os
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import scaled_timeout
from tests.fixtures.modelio import N_FEATURES
from tests.workers.modelio import payloads
from workers.modelio import ModelLimits, SandboxLimits, predict_in_sandbox
from workers.modelio.export import (
    export_sklearn_onnx,
    export_torch_safetensors,
    export_xgboost_json,
    export_xgboost_ubjson,
)
from workers.modelio.sandbox import child_environment

# a loaded machine is slow, not a hung model
LIMITS = SandboxLimits(wall_seconds=scaled_timeout(60))
TAMPER = {
    "xgboost-json": payloads.tamper_xgboost_json,
    "xgboost-ubjson": payloads.tamper_xgboost_ubjson,
    "onnx-random-forest": payloads.tamper_onnx_tree,
    "onnx-xgboost": payloads.tamper_onnx_tree,
}
CRASHING_TAMPERINGS = ("child_index", "feature_index", "cycle")


@pytest.mark.parametrize("skip_structural_checks", [False, True])
def test_hostile_files_are_refused_in_the_child_and_never_executed(
    tmp_path, toy_data, toy_tree_models, skip_structural_checks
):
    marker = tmp_path / "executed"
    hostile = payloads.hostile_payloads(marker)
    features = toy_data[0][:20]
    outcomes = predict_in_sandbox(
        [*hostile.values(), toy_tree_models["xgboost-json"]],
        features,
        n_classes=2,
        limits=LIMITS,
        skip_structural_checks=skip_structural_checks,
    )
    for name, outcome in zip(hostile, outcomes):
        assert outcome.probabilities is None, name
        assert "Onefold" in outcome.error and (
            "pickle" in outcome.error or "TorchScript" in outcome.error or "numpy" in outcome.error
        ), (name, outcome.error)
    assert outcomes[-1].error is None and outcomes[-1].probabilities.shape == (20, 2)
    assert not marker.exists()


def test_tampered_trees_crash_only_the_child_and_the_next_good_model_is_validated(
    toy_data, toy_tree_models
):
    features = toy_data[0][:50]
    caller = os.getpid()
    cases = [(name, kind) for name in sorted(TAMPER) for kind in payloads.TAMPERINGS]
    tampered = [TAMPER[name](toy_tree_models[name], kind) for name, kind in cases]
    good = toy_tree_models["xgboost-json"]
    outcomes = predict_in_sandbox(
        [*tampered, good],
        features,
        n_classes=2,
        # scaled: under load 20 s was reached
        limits=SandboxLimits(wall_seconds=scaled_timeout(20)),
        skip_structural_checks=True,
    )
    for (name, kind), outcome in zip(cases, outcomes):
        if kind in CRASHING_TAMPERINGS:
            assert outcome.probabilities is None and outcome.error, (name, kind)
        if name.startswith("xgboost") and kind in CRASHING_TAMPERINGS:
            assert (
                outcome.error
                == "The model crashed the predictor (signal SIGSEGV); it is malformed."
            )
    assert os.getpid() == caller
    assert outcomes[-1].error is None
    np.testing.assert_allclose(
        outcomes[-1].probabilities, _xgboost_native(good, features), atol=1e-6
    )


def test_tampered_trees_are_refused_in_the_child_when_checks_run(toy_data, toy_tree_models):
    tampered = [TAMPER[name](toy_tree_models[name], "child_index") for name in sorted(TAMPER)]
    outcomes = predict_in_sandbox(tampered, toy_data[0][:10], n_classes=2, limits=LIMITS)
    assert all("1000000" in outcome.error for outcome in outcomes)


def _xgboost_native(data: bytes, features: np.ndarray) -> np.ndarray:
    import xgboost

    booster = xgboost.Booster()
    booster.load_model(bytearray(data))
    positive = booster.predict(xgboost.DMatrix(features)).astype(np.float64)
    return np.column_stack([1 - positive, positive])


@pytest.fixture(scope="module")
def adult_models(adult_data):
    """Real models trained on Adult features, with the native library's probabilities on 1,000 rows."""
    import torch
    from sklearn.ensemble import RandomForestClassifier
    from xgboost import XGBClassifier

    from workers.zoo import build_module

    features, labels = adult_data
    train, test, n_features = slice(0, 4_000), slice(4_000, 5_000), features.shape[1]
    forest = RandomForestClassifier(n_estimators=20, max_depth=10, random_state=0).fit(
        features[train], labels[train]
    )
    boosted = XGBClassifier(n_estimators=30, max_depth=4, random_state=0).fit(
        features[train], labels[train]
    )
    spec = {"architecture": "mlp", "n_features": n_features, "hidden_sizes": [32], "n_classes": 2}
    network = _train_mlp(build_module(spec), features[train], labels[train])
    with torch.no_grad():
        network_probabilities = torch.softmax(
            network(torch.from_numpy(features[test])).double(), dim=1
        ).numpy()
    return features[test], {
        "onnx-random-forest": (
            export_sklearn_onnx(forest, n_features),
            forest.predict_proba(features[test]),
        ),
        "xgboost-json": (export_xgboost_json(boosted), boosted.predict_proba(features[test])),
        "xgboost-ubjson": (export_xgboost_ubjson(boosted), boosted.predict_proba(features[test])),
        "safetensors-mlp": (export_torch_safetensors(network, spec), network_probabilities),
    }


def _train_mlp(module, features, labels):
    import torch

    torch.manual_seed(0)
    optimiser = torch.optim.Adam(module.parameters(), lr=0.01)
    inputs, targets = torch.from_numpy(features), torch.from_numpy(labels)
    for _ in range(30):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(module(inputs), targets).backward()
        optimiser.step()
    return module.eval()


def test_real_adult_models_predict_in_the_sandbox_as_natively(adult_models):
    features, models = adult_models
    outcomes = predict_in_sandbox(
        [data for data, _ in models.values()], features, n_classes=2, limits=LIMITS
    )
    for (name, (_, native)), outcome in zip(models.items(), outcomes):
        assert outcome.error is None, (name, outcome.error)
        assert outcome.probabilities.dtype == np.float64 and outcome.probabilities.shape == (
            1_000,
            2,
        )
        assert np.abs(outcome.probabilities - native).max() <= 1e-5, name


def test_columns_are_aligned_to_the_federation_classes(toy_data, toy_tree_models):
    (outcome,) = predict_in_sandbox(
        [toy_tree_models["onnx-random-forest"]], toy_data[0][:10], n_classes=4, limits=LIMITS
    )
    assert outcome.probabilities.shape == (10, 4)
    np.testing.assert_array_equal(outcome.probabilities[:, 2:], 0.0)
    np.testing.assert_allclose(outcome.probabilities.sum(axis=1), 1.0, rtol=1e-6)


def test_limits_are_checked_in_the_child_before_any_native_load(toy_data, toy_tree_models, toy_mlp):
    outcomes = predict_in_sandbox(
        [toy_tree_models["xgboost-ubjson"], toy_mlp[2]],
        toy_data[0][:10],
        n_classes=3,
        limits=LIMITS,
        model_limits=ModelLimits(max_trees=2, max_parameters=50),
    )
    assert "3 trees; the limit is 2" in outcomes[0].error
    assert "83 parameters; the limit is 50" in outcomes[1].error


def test_a_model_over_the_memory_limit_gets_an_error_and_the_caller_lives(toy_data, toy_mlp):
    caller = os.getpid()
    (outcome,) = predict_in_sandbox(
        [toy_mlp[2]], toy_data[0][:10], n_classes=3, limits=SandboxLimits(memory_bytes=300 * 2**20)
    )
    assert outcome.probabilities is None
    assert outcome.error == "The model needed more than 300 MB of memory."
    assert os.getpid() == caller


def test_a_limit_too_small_for_the_libraries_is_reported_as_memory(toy_data, toy_mlp):
    """At 64 MB OpenBLAS cannot even allocate its buffers while numpy loads; the reason must still say memory."""
    (outcome,) = predict_in_sandbox(
        [toy_mlp[2]], toy_data[0][:10], n_classes=3, limits=SandboxLimits(memory_bytes=64 * 2**20)
    )
    assert outcome.error == "The model needed more than 64 MB of memory."


def test_a_model_past_the_wall_clock_limit_gets_an_error_and_the_caller_lives(toy_data, toy_mlp):
    (outcome,) = predict_in_sandbox(
        [toy_mlp[2]], toy_data[0][:10], n_classes=3, limits=SandboxLimits(wall_seconds=0.2)
    )
    assert outcome.error == "The model did not finish predicting within 0.2 seconds."


def test_the_child_environment_carries_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "hunter2")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:password@db/onefold")
    environment = child_environment(tmp_path)
    assert environment["PYTHONPATH"].startswith(str(Path(__file__).resolve().parents[3]))
    assert set(environment) == {
        "PATH",
        "PYTHONPATH",
        "HOME",
        "TMPDIR",
        "PYTHONNOUSERSITE",
        "PYTHONDONTWRITEBYTECODE",
        "LANG",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    }
    assert environment["HOME"] == str(tmp_path)


def test_no_models_means_no_child_and_no_outcomes(toy_data):
    assert predict_in_sandbox([], toy_data[0], n_classes=2, limits=LIMITS) == []


def test_safetensors_network_predicts_softmax_of_its_logits(toy_data, toy_mlp):
    import torch

    module, _, data = toy_mlp
    features = toy_data[0][:30]
    (outcome,) = predict_in_sandbox([data], features, n_classes=3, limits=LIMITS)
    with torch.no_grad():
        expected = torch.softmax(module(torch.from_numpy(features)).double(), dim=1).numpy()
    np.testing.assert_allclose(outcome.probabilities, expected, atol=1e-6)
    assert features.shape[1] == N_FEATURES


def test_a_model_past_the_cpu_limit_gets_an_error():
    from workers.modelio.export import export_torch_safetensors
    from workers.zoo import build_module

    spec = {"architecture": "mlp", "n_features": 8, "hidden_sizes": [1024, 1024], "n_classes": 2}
    wide = export_torch_safetensors(
        build_module(spec), spec
    )  # ~100 GFLOP on 50,000 rows: seconds of CPU
    features = np.random.default_rng(0).normal(size=(50_000, 8)).astype(np.float32)
    (outcome,) = predict_in_sandbox(
        [wide], features, n_classes=2, limits=SandboxLimits(cpu_seconds=1)
    )
    assert outcome.probabilities is None
    assert outcome.error in (
        "The model needed more than 1 seconds of CPU time.",
        "The predictor was killed: the model needed more than 1 seconds of CPU time "
        "or more than 4096 MB of memory.",
    )


def test_three_class_xgboost_and_a_booster_with_column_names_predict_as_natively(toy_data):
    import pandas as pd
    from xgboost import XGBClassifier

    features, binary, three = toy_data
    multi = XGBClassifier(n_estimators=4, max_depth=3, random_state=0).fit(features, three)
    frame = pd.DataFrame(features, columns=[f"column {index}" for index in range(N_FEATURES)])
    named = XGBClassifier(n_estimators=4, max_depth=3, random_state=0).fit(frame, binary)
    models = [
        export_xgboost_json(multi),
        export_xgboost_ubjson(multi),
        bytes(named.get_booster().save_raw("json")),
    ]
    outcomes = predict_in_sandbox(models, features[:40], n_classes=3, limits=LIMITS)
    for outcome in outcomes[:2]:
        np.testing.assert_allclose(
            outcome.probabilities, multi.predict_proba(features[:40]), atol=1e-6
        )
    expected = np.column_stack([named.predict_proba(frame[:40]), np.zeros(40)])
    np.testing.assert_allclose(outcomes[2].probabilities, expected, atol=1e-6)


def _softmax(logits: np.ndarray) -> np.ndarray:
    exponentials = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exponentials / exponentials.sum(axis=1, keepdims=True)


def test_xgboost_and_safetensors_models_get_onnx_twins_that_predict_their_own_probabilities(
    toy_data, toy_tree_models, toy_mlp
):
    import onnxruntime
    import torch
    from xgboost import XGBClassifier

    features, binary, three = toy_data
    boosters = {
        objective: export_xgboost_json(
            XGBClassifier(n_estimators=4, max_depth=3, objective=objective, random_state=0).fit(
                features, labels
            )
        )
        for objective, labels in (
            ("multi:softprob", three),
            ("multi:softmax", three),
            ("reg:logistic", binary),
        )
    }
    module, _, safetensors = toy_mlp
    onnx_model = toy_tree_models["onnx-random-forest"]
    models = [*boosters.values(), toy_tree_models["xgboost-ubjson"], safetensors, onnx_model]
    native = predict_in_sandbox(models, features, n_classes=3, limits=LIMITS)
    converted = predict_in_sandbox(
        models, features, n_classes=3, limits=LIMITS, convert_to_onnx=True
    )
    for own, twin in zip(native, converted):
        assert own.error is None and twin.error is None, twin.error
        np.testing.assert_allclose(twin.probabilities, own.probabilities, atol=1e-5)
        session = onnxruntime.InferenceSession(twin.onnx, providers=["CPUExecutionProvider"])
        outputs = session.run(None, {session.get_inputs()[0].name: features})
        probabilities = (
            _softmax(outputs[0].astype(np.float64))
            if len(outputs) == 1
            else next(output for output in outputs if output.dtype.kind == "f")
        )
        np.testing.assert_allclose(
            probabilities, own.probabilities[:, : probabilities.shape[1]], atol=1e-5
        )
    assert converted[-1].onnx == onnx_model  # an ONNX model is its own twin
    with torch.no_grad():
        network = torch.softmax(module(torch.from_numpy(features)).double(), dim=1).numpy()
    np.testing.assert_allclose(converted[4].probabilities, network, atol=1e-5)


def test_a_booster_whose_onnx_conversion_predicts_otherwise_is_refused_with_the_difference(
    toy_data,
):
    from xgboost import XGBClassifier

    features, _, three = toy_data
    # onnxmltools assigns the trees of a multi-class random-forest booster to the wrong classes
    forest_booster = export_xgboost_json(
        XGBClassifier(
            n_estimators=3, num_parallel_tree=3, max_depth=3, objective="multi:softprob"
        ).fit(features, three)
    )
    (native,) = predict_in_sandbox([forest_booster], features, n_classes=3, limits=LIMITS)
    (converted,) = predict_in_sandbox(
        [forest_booster], features, n_classes=3, limits=LIMITS, convert_to_onnx=True
    )
    assert native.error is None and native.probabilities.shape == (600, 3)
    assert converted.probabilities is None and converted.onnx is None
    assert converted.error.startswith("The model's ONNX conversion predicts probabilities up to ")
    assert converted.error.endswith(
        "away from the model's own (at most 1e-05 is accepted), so it cannot be run with onnxruntime alone."
    )
