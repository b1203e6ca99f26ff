"""inspect_model fails closed: damaged bytes of any accepted format give a model or a RefusedModelError."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.modelio import N_FEATURES
from workers.modelio import ModelLimits, RefusedModelError, inspect_model

FUZZ_SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
EDITS = st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=4
)


def _damaged(data: bytes, edits, keep_fraction: float) -> bytes:
    damaged = bytearray(data)
    for where, value in edits:
        damaged[int(where * len(damaged))] = value
    return bytes(damaged[: max(1, int(keep_fraction * len(damaged)))])


@pytest.mark.parametrize(
    "model_name", ["xgboost-json", "xgboost-ubjson", "onnx-random-forest", "onnx-xgboost"]
)
@FUZZ_SETTINGS
@given(edits=EDITS, keep_fraction=st.sampled_from([1.0, 1.0, 1.0, 0.5, 0.99]))
def test_damaged_tree_model_is_validated_or_refused_never_anything_else(
    toy_tree_models, model_name, edits, keep_fraction
):
    data = _damaged(toy_tree_models[model_name], edits, keep_fraction)
    try:
        inspect_model(data, n_features=N_FEATURES, n_classes=2, limits=ModelLimits())
    except RefusedModelError as refusal:
        assert str(refusal)


@FUZZ_SETTINGS
@given(edits=EDITS, keep_fraction=st.sampled_from([1.0, 1.0, 1.0, 0.5, 0.99]))
def test_damaged_safetensors_is_validated_or_refused_never_anything_else(
    toy_mlp, edits, keep_fraction
):
    try:
        inspect_model(
            _damaged(toy_mlp[2], edits, keep_fraction),
            n_features=N_FEATURES,
            n_classes=3,
            limits=ModelLimits(),
        )
    except RefusedModelError as refusal:
        assert str(refusal)
