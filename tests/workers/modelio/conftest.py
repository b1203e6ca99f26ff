"""Small real models, trained once per session, for the model I/O tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import DATA_DIR
from workers.modelio import export

ADULT = DATA_DIR / "adult.parquet"
N_FEATURES = 6


@pytest.fixture(scope="session")
def toy_data():
    """600 rows of 6 float32 features with a binary and a 3-class label."""
    generator = np.random.default_rng(0)
    features = generator.normal(size=(600, N_FEATURES)).astype(np.float32)
    binary = (features[:, 0] + features[:, 1] > 0).astype(int)
    three = (features[:, 0] > 0).astype(int) + (features[:, 2] > 0.5).astype(int)
    return features, binary, three


@pytest.fixture(scope="session")
def toy_tree_models(toy_data):
    """The same binary task in every accepted tree format: name -> model bytes."""
    from sklearn.ensemble import RandomForestClassifier
    from xgboost import XGBClassifier

    features, binary, _ = toy_data
    forest = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(
        features, binary
    )
    boosted = XGBClassifier(n_estimators=3, max_depth=3, random_state=0).fit(features, binary)
    return {
        "xgboost-json": export.export_xgboost_json(boosted),
        "xgboost-ubjson": export.export_xgboost_ubjson(boosted),
        "onnx-random-forest": export.export_sklearn_onnx(forest, N_FEATURES),
        "onnx-xgboost": export.export_xgboost_onnx(boosted, N_FEATURES),
    }


@pytest.fixture(scope="session")
def toy_mlp():
    """A zoo MLP for 6 features and 3 classes, with its spec and safetensors bytes."""
    import torch

    from workers.zoo import build_module

    torch.manual_seed(0)
    spec = {"architecture": "mlp", "n_features": N_FEATURES, "hidden_sizes": [8], "n_classes": 3}
    module = build_module(spec)
    return module, spec, export.export_torch_safetensors(module, spec)


@pytest.fixture(scope="session")
def adult_data():
    """5,000 Adult rows: numeric columns scaled to [0, 1] plus one-hot categories, as float32."""
    import pandas as pd

    frame = pd.read_parquet(ADULT).sample(n=5_000, random_state=0)
    labels = (frame.pop("income").str.strip().str.startswith(">50K")).astype(int).to_numpy()
    numeric = frame.select_dtypes("number")
    encoded = pd.concat(
        [numeric / numeric.abs().max(), pd.get_dummies(frame.select_dtypes("object"))], axis=1
    )
    return encoded.to_numpy(dtype=np.float32), labels
