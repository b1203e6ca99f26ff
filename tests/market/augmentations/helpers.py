"""An FAug augmentation opened through the API and silos' seeds uploaded to it, as the augmentation tests do."""

import numpy as np

from tests.conftest import api_client_for

N_FEATURES = 3


AUGMENTATION = {
    "federation": "adult-income",
    "name": "FAug on Adult",
    "n_features": N_FEATURES,
    "epochs": 2,
    "batch_size": 4,
}


def seeds(index: int) -> dict:
    """Silo ``index`` lacks label 1: two seeds of it and ``index`` redundant seeds of label 0."""
    labels = [1, 1] + [0] * index
    rows = np.random.default_rng(index).uniform(size=(len(labels), N_FEATURES)).round(3)
    return {"target_labels": [1], "labels": labels, "features": rows.tolist()}


def open_augmentation(operator_api, **changes) -> dict:
    response = operator_api.post("/api/augmentations/", {**AUGMENTATION, **changes}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def upload(user, augmentation_id: int, body: dict):
    return api_client_for(user).post(
        f"/api/augmentations/{augmentation_id}/seeds/", body, format="json"
    )
