"""The augmentation form and a silo's seeds file, as the page tests send them."""

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import api_client_for


def open_augmentation(operator) -> int:
    response = api_client_for(operator).post(
        "/api/augmentations/",
        {
            "federation": "adult-income",
            "name": "FAug on Adult",
            "n_features": 2,
            "epochs": 1,
            "batch_size": 2,
            "noise_multiplier": 1.0,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def seeds_file(**changes) -> SimpleUploadedFile:
    body = {
        "target_labels": [1],
        "labels": [1, 0, 0, 0],
        "features": [[0.1, 0.9], [0.5, 0.5], [0.2, 0.3], [0.7, 0.1]],
    }
    return SimpleUploadedFile("seeds.json", json.dumps({**body, **changes}).encode())


FORM = {
    "name": "FAug on Adult",
    "n_features": "2",
    "epochs": "60",
    "batch_size": "32",
    "noise_multiplier": "",
    "target_epsilon": "10",
    "max_grad_norm": "1.0",
    "delta": "0.00001",
}
