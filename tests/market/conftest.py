"""Real models trained on the encoded Adult data, exported to every accepted format (session-scoped)."""

import numpy as np
import pytest

from tests.conftest import ADULT_LABELS
from workers.features import encode_features, encode_labels, infer_feature_spec, read_table


@pytest.fixture(scope="session")
def adult_training(adult_frame, adult_public_csv):
    """Encoded features and labels of 2,000 Adult rows, with the spec the market infers from the public CSV."""
    spec = infer_feature_spec(read_table(adult_public_csv), label_column="income")
    rows = adult_frame.iloc[:2000]
    return encode_features(rows, spec), encode_labels(rows["income"], ADULT_LABELS)


@pytest.fixture(scope="session")
def adult_models(adult_training):
    """Fitted native models keyed by name: random forest, XGBoost and a zoo MLP."""
    import torch
    from sklearn.ensemble import RandomForestClassifier
    from xgboost import XGBClassifier

    from workers.zoo import build_module

    features, labels = adult_training
    forest = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(features, labels)
    boosted = XGBClassifier(n_estimators=20, max_depth=4, random_state=0).fit(features, labels)
    spec = {"architecture": "mlp", "n_features": features.shape[1], "hidden_sizes": [16], "n_classes": 2}
    torch.manual_seed(0)
    network = build_module(spec)
    optimiser = torch.optim.Adam(network.parameters(), lr=1e-2)
    inputs, targets = torch.from_numpy(features), torch.from_numpy(labels)
    for _ in range(50):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(network(inputs), targets).backward()
        optimiser.step()
    return {"forest": forest, "boosted": boosted, "network": network, "network_spec": spec}


@pytest.fixture(scope="session")
def model_files(adult_models, adult_training) -> dict[str, bytes]:
    """One file per accepted format, named by the format."""
    from workers.modelio.export import (export_sklearn_onnx, export_torch_safetensors, export_xgboost_json,
                                        export_xgboost_ubjson)

    n_features = adult_training[0].shape[1]
    return {
        "forest.onnx": export_sklearn_onnx(adult_models["forest"], n_features),
        "boosted.json": export_xgboost_json(adult_models["boosted"]),
        "boosted.ubj": export_xgboost_ubjson(adult_models["boosted"]),
        "network.safetensors": export_torch_safetensors(adult_models["network"], adult_models["network_spec"]),
    }


def native_probabilities(adult_models, features: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    with torch.no_grad():
        network = torch.softmax(adult_models["network"](torch.from_numpy(features)), dim=1).numpy()
    return {"forest.onnx": adult_models["forest"].predict_proba(features),
            "boosted.json": adult_models["boosted"].predict_proba(features),
            "boosted.ubj": adult_models["boosted"].predict_proba(features),
            "network.safetensors": network}
