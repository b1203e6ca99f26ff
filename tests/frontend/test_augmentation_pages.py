"""The augmentation page: a silo uploads seeds and sees only its own counts and leakage, an operator sees every
silo's counts and starts the training (its ε shown as reserved); the federation hub's exchanges tab lists it."""

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from market.augmentations.models import SeedUpload
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


def test_a_silo_uploads_seeds_on_the_page_and_sees_only_its_own_counts_and_leakage(
    client, settings, operator, federation_with_data, silo_user, other_silo_user
):
    from market.federations.services import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    augmentation_id = open_augmentation(operator)
    client.force_login(other_silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(silo_user)
    page = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    assert 'id="seeds-file"' in page and "Contoso Bank" not in page
    too_big = client.post(
        f"/augmentations/{augmentation_id}/seeds/",
        {
            "seeds": SimpleUploadedFile(
                "seeds.json", b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
            )
        },
    )
    assert too_big.status_code == 400 and "A seeds file is at most" in too_big.content.decode()
    bad = client.post(
        f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file(labels=[0, 0, 0, 0])}
    )
    assert bad.status_code == 400 and "none of [1] is among your seeds" in bad.content.decode()
    uploaded = client.post(
        f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()}, follow=True
    )
    page = uploaded.content.decode()
    assert "Your seeds were uploaded." in page and "Northwind Hospital" in page
    assert "<td>4</td><td>1</td><td>3</td><td>0.25</td>" in page and "Contoso Bank" not in page
    assert 'id="seeds-file"' not in page  # one upload per silo
    assert SeedUpload.objects.count() == 2


def test_an_operator_sees_every_silo_and_starts_the_training_with_its_epsilon_reserved(
    client, operator, federation_with_data, silo_user
):
    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(operator)
    page = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    assert "<td>Northwind Hospital</td><td>4</td>" in page and "<td>—</td>" in page
    assert "Start training (reserves ε for 1 silo)" in page
    started = client.post(f"/augmentations/{augmentation_id}/start/", follow=True)
    page = started.content.decode()
    assert "The generator&#x27;s training is queued." in page and "Queued for training" in page
    assert "reserved to each contributing silo" in page
    hub = client.get("/federations/adult-income/?tab=exchanges").content.decode()
    assert f'href="/augmentations/{augmentation_id}/"' in hub and "DP-SGD" in hub


def test_the_ledger_api_and_pages_name_the_augmentation_a_dp_generator_reserved_for(
    client, operator, federation_with_data, silo_user
):
    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(operator)
    client.post(f"/augmentations/{augmentation_id}/start/")
    [line] = api_client_for(operator).get("/api/federations/adult-income/budget-ledger/").json()
    assert (line["kind"], line["augmentation_id"], line["job_id"]) == (
        "reserve",
        augmentation_id,
        None,
    )
    ledger = client.get("/federations/adult-income/budgets/ledger/").content.decode()
    assert (
        f'<a href="/augmentations/{augmentation_id}/">Augmentation #{augmentation_id}</a>' in ledger
    )
    dashboard = client.get("/federations/adult-income/budgets/").content.decode()
    assert f"Augmentation #{augmentation_id}" in dashboard
