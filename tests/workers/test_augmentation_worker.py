"""A real Celery worker trains a FAug generator with a DP discriminator, started through the API and the outbox."""

import numpy as np
import pytest

from tests.conftest import api_client_for, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.worker
def test_a_real_worker_trains_publishes_and_charges_a_dp_generator(
    celery_worker, federation_with_data, operator, silo_user
):
    from market.augmentations.models import Augmentation
    from market.budgets.models import BudgetEntry
    from workers.algorithms.faug import load_generator

    operator_api = api_client_for(operator)
    augmentation = operator_api.post(
        "/api/augmentations/",
        {
            "federation": "adult-income",
            "name": "FAug on Adult",
            "n_features": 4,
            "epochs": 3,
            "batch_size": 4,
            "target_epsilon": 8.0,
        },
        format="json",
    ).json()
    rows = np.random.default_rng(0).uniform(size=(12, 4)).round(3).tolist()
    seeds = api_client_for(silo_user).post(
        f"/api/augmentations/{augmentation['id']}/seeds/",
        {"target_labels": [1], "labels": [1] * 4 + [0] * 8, "features": rows},
        format="json",
    )
    assert seeds.status_code == 201 and seeds.json()["leakage"] == pytest.approx(1 / 3)
    started = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert started.status_code == 202, started.json()
    wait_until(
        lambda: Augmentation.objects.get(id=augmentation["id"]).status in ("published", "failed"),
        timeout=120,
        message="the worker did not train the generator",
    )
    published = Augmentation.objects.get(id=augmentation["id"])
    assert (published.status, published.status_reason) == ("published", "")
    assert published.privacy_report["epsilon"] <= 8.0
    assert list(
        BudgetEntry.objects.filter(augmentation=published)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "charge"]
    download = api_client_for(silo_user).get(f"/api/augmentations/{augmentation['id']}/generator/")
    generator = load_generator(download.content)
    assert generator.privacy.n_examples == 12 and generator.spec["n_features"] == 4
