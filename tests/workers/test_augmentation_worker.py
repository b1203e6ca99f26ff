"""FAug end to end over real HTTP: an operator opens an augmentation with a DP discriminator, a silo uploads seeds
with the toolkit's `seeds` (leakage first, on a dry run), a real Celery worker trains the generator through the outbox, its ε is
charged, and the silo's `augment --augmentation` fetches the published generator and appends generated rows."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import csv_bytes, scaled_timeout

pytestmark = pytest.mark.django_db(transaction=True)

PIXELS = [f"pixel{index}" for index in range(4)]
CLASSES = ["zero", "one", "two"]


@pytest.fixture
def digits(operator, silo_user):
    """A federation of 4 numeric pixel columns in [0, 1] and 3 classes, with Northwind Hospital a member."""
    from market.federations.membership import federation_join
    from market.federations.services import federation_create, public_dataset_upload

    federation = federation_create(
        name="Digits",
        description="Tiny digits.",
        class_labels=CLASSES,
        label_column="digit",
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L1",
        default_parameters={},
        policies={"membership_policy": "open"},  # its silo joins by itself
        created_by=operator,
    )
    rows = pd.DataFrame(np.random.default_rng(1).uniform(size=(40, 4)).round(3), columns=PIXELS)
    public_dataset_upload(federation=federation, data=csv_bytes(rows), uploaded_by=operator)
    federation_join(federation=federation, user=silo_user)
    return federation


@pytest.mark.worker
def test_one_real_worker_trains_a_dp_generator_and_a_ctgan_for_augment_and_stops_a_cancelled_training(
    live_server, celery_worker, digits, operator, silo_user, tmp_path
):
    """One worker (its start costs more than these small trainings) serves the three augmentations in turn."""
    for folder in ("dp", "ctgan"):
        (tmp_path / folder).mkdir()
    a_silo_uploads_seeds_a_real_worker_trains_a_dp_generator_and_augment_fetches_it(
        live_server, digits, operator, silo_user, tmp_path / "dp"
    )
    a_real_worker_trains_a_ctgan_and_augment_appends_its_published_rows(
        live_server, digits, operator, silo_user, tmp_path / "ctgan"
    )
    a_real_worker_stops_a_long_ctgan_training_that_an_operator_cancels(digits, operator, silo_user)


def a_silo_uploads_seeds_a_real_worker_trains_a_dp_generator_and_augment_fetches_it(
    live_server, digits, operator, silo_user, tmp_path
):
    from market.accounts.services import user_token
    from market.augmentations.models import SeedUpload
    from market.budgets.models import BudgetEntry
    from workers.silo.augment import augment, seeds
    from workers.silo.cli import build_parser
    from workers.silo.client import OnefoldClient

    operator_client = OnefoldClient(live_server.url, user_token(user=operator))
    silo_client = OnefoldClient(live_server.url, user_token(user=silo_user))
    opened = operator_client.augmentation_create(
        federation=digits.slug,
        name="FAug on digits",
        n_features=4,
        epochs=3,
        batch_size=4,
        target_epsilon=8.0,
    )
    rng = np.random.default_rng(0)
    labels = [2] * 4 + [0] * 4 + [1] * 4  # lacks 'two': 4 seeds of it, 8 redundant
    features = np.clip(rng.normal(0.2 + 0.3 * np.array(labels)[:, None], 0.05, (12, 4)), 0, 1)
    table = tmp_path / "silo.csv"
    local = pd.DataFrame(features.round(4) * 255, columns=PIXELS)
    local["digit"] = [CLASSES[label] for label in labels]
    local.to_csv(table, index=False)
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    (pulled / "federation.json").write_text(json.dumps(silo_client.federation(digits.slug).data))
    (pulled / "feature-spec.json").write_text(json.dumps(silo_client.feature_spec(digits.slug)))
    (pulled / "features.npz").write_bytes(silo_client.public_features(digits.slug))
    seeds_arguments = [
        "seeds", str(opened.id), "--data", str(table), "--pulled", str(pulled),
        "--target-label", "two", "--per-label", "4", "--redundant", "8", "--feature-scale", "255",
    ]  # fmt: skip
    previewed, sentence = seeds(
        build_parser().parse_args([*seeds_arguments, "--dry-run"]), silo_client
    )
    assert (previewed["leakage"], previewed["uploaded"]) == (pytest.approx(1 / 3), False)
    assert "leakage 0.33" in sentence and not SeedUpload.objects.exists()
    uploaded, sentence = seeds(build_parser().parse_args(seeds_arguments), silo_client)
    assert (uploaded["n_target"], uploaded["n_redundant"], uploaded["uploaded"]) == (4, 8, True)
    # the only silo so far: the others would learn its targets from the generator as the server does
    assert uploaded["inter_device_leakage"] == pytest.approx(1 / 3)
    assert "inter-device leakage is 0.33 of the 12 seeds pooled so far" in sentence
    started = operator_client.augmentation_start(opened.id)
    assert started.status == "queued" and 0 < started.epsilon <= 8.0
    published = silo_client.augmentation_wait(
        opened.id, timeout_seconds=scaled_timeout(120), interval_seconds=0.5
    )
    assert (published.status, published.status_reason) == ("published", "")
    assert [(seed["n_seeds"], seed["target_labels"]) for seed in published.seeds] == [(12, [2])]
    assert list(
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=opened.id)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "charge"]

    local = local[local["digit"] != "two"]  # the silo trains on its rows without the seeds
    local.to_csv(table, index=False)
    arguments = [
        "augment", digits.slug, "--augmentation", str(opened.id), "--data", str(table),
        "--pulled", str(pulled), "--target-label", "two", "--per-label", "5", "--feature-scale", "255",
    ]  # fmt: skip
    result, sentence = augment(build_parser().parse_args(arguments), silo_client)
    assert (result["augmentation"], result["generated_rows"]) == (opened.id, 5)
    assert result["generator_epsilon"] == pytest.approx(started.epsilon)
    augmented = pd.read_csv(result["output"])
    assert len(augmented) == 13 and (augmented["digit"] == "two").sum() == 5
    generated = augmented[augmented["digit"] == "two"][PIXELS].to_numpy()
    assert generated.min() >= 0 and generated.max() <= 255  # back in the table's scale


def a_real_worker_trains_a_ctgan_and_augment_appends_its_published_rows(
    live_server, digits, operator, silo_user, tmp_path
):
    """A CTGAN augmentation: raw seeds through `seeds`, the worker trains and publishes generated rows (nothing
    charged), and `augment --augmentation` appends rows of the target label."""
    from market.accounts.services import user_token
    from market.budgets.models import BudgetEntry
    from workers.silo.augment import augment, seeds
    from workers.silo.cli import build_parser
    from workers.silo.client import OnefoldClient

    operator_client = OnefoldClient(live_server.url, user_token(user=operator))
    silo_client = OnefoldClient(live_server.url, user_token(user=silo_user))
    opened = operator_client.augmentation_create(
        federation=digits.slug, name="CTGAN on digits", n_features=4, epochs=2, batch_size=10,
        generator="ctgan",
    )  # fmt: skip
    assert (opened.generator, opened.private) == ("ctgan", False)
    rng = np.random.default_rng(0)
    labels = np.array([2] * 4 + [0] * 4 + [1] * 4)
    table = tmp_path / "silo.csv"
    local = pd.DataFrame(rng.integers(0, 256, (12, 4)) + 40 * labels[:, None], columns=PIXELS)
    local["digit"] = [CLASSES[label] for label in labels]
    local.to_csv(table, index=False)
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    (pulled / "federation.json").write_text(json.dumps(silo_client.federation(digits.slug).data))
    (pulled / "feature-spec.json").write_text(json.dumps(silo_client.feature_spec(digits.slug)))
    (pulled / "features.npz").write_bytes(silo_client.public_features(digits.slug))
    uploaded, _ = seeds(
        build_parser().parse_args(
            [
                "seeds",
                str(opened.id),
                "--data",
                str(table),
                "--pulled",
                str(pulled),
                "--target-label",
                "two",
                "--per-label",
                "4",
                "--redundant",
                "8",
            ]
        ),  # fmt: skip
        silo_client,
    )
    assert (uploaded["n_target"], uploaded["uploaded"]) == (
        4,
        True,
    )  # raw values, no [0, 1] scaling
    assert operator_client.augmentation_start(opened.id).epsilon is None
    published = silo_client.augmentation_wait(
        opened.id, timeout_seconds=scaled_timeout(120), interval_seconds=0.5
    )
    assert (published.status, published.status_reason) == ("published", "")
    spec = published.generator_spec  # ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL rows of each label
    assert (spec["architecture"], spec["rows"]) == (
        "ctgan_samples",
        3 * spec["rows_per_label"]
        - spec["seed_copies_dropped"],  # copies of a seed row are not published
    )
    assert not BudgetEntry.objects.filter(
        spender_kind="augmentation", spender_id=opened.id
    ).exists()

    local[local["digit"] != "two"].to_csv(table, index=False)
    result, sentence = augment(
        build_parser().parse_args(
            [
                "augment",
                digits.slug,
                "--augmentation",
                str(opened.id),
                "--data",
                str(table),
                "--pulled",
                str(pulled),
                "--target-label",
                "two",
                "--per-label",
                "5",
            ]
        ),  # fmt: skip
        silo_client,
    )
    assert (result["generated_rows"], result["generator_epsilon"]) == (5, None)
    assert "rows a CTGAN generated without a privacy guarantee" in sentence
    augmented = pd.read_csv(result["output"])
    assert len(augmented) == 13 and (augmented["digit"] == "two").sum() == 5
    seeded = local[PIXELS].to_numpy()  # the generated rows lie in the pooled seeds' range
    generated = augmented[augmented["digit"] == "two"][PIXELS].to_numpy()
    assert (generated >= seeded.min(axis=0)).all() and (generated <= seeded.max(axis=0)).all()


def a_real_worker_stops_a_long_ctgan_training_that_an_operator_cancels(digits, operator, silo_user):
    """1,000 CTGAN epochs in batches of 2 (within the work limit, minutes of training): the cancel API asks, the
    worker stops at its next optimiser step and ends the augmentation itself (no reaper runs here)."""
    from market.augmentations.models import Augmentation
    from market.budgets.models import BudgetEntry
    from tests.conftest import api_client_for, wait_until

    operator_api = api_client_for(operator)
    opened = operator_api.post(
        "/api/augmentations/",
        {
            "federation": digits.slug,
            "name": "Too long",
            "n_features": 4,
            "epochs": 1000,
            "batch_size": 2,
            "generator": "ctgan",
        },
        format="json",
    )
    assert opened.status_code == 201, opened.json()
    augmentation_id = opened.json()["id"]
    labels = [2] * 4 + [0] * 4 + [1] * 4
    rows = np.random.default_rng(0).integers(0, 256, (12, 4)).tolist()
    uploaded = api_client_for(silo_user).post(
        f"/api/augmentations/{augmentation_id}/seeds/",
        {"target_labels": [2], "labels": labels, "features": rows},
        format="json",
    )
    assert uploaded.status_code == 201, uploaded.json()
    assert operator_api.post(f"/api/augmentations/{augmentation_id}/start/").status_code == 202
    wait_until(
        lambda: Augmentation.objects.get(id=augmentation_id).status == "training",
        timeout=120,
        interval=0.3,
        message="the worker never claimed the training",
    )
    requested = operator_api.post(f"/api/augmentations/{augmentation_id}/cancel/")
    assert (requested.status_code, requested.json()["status"]) == (202, "training")
    wait_until(
        lambda: Augmentation.objects.get(id=augmentation_id).status != "training",
        timeout=60,
        interval=0.3,
        message="the worker did not stop the cancelled training",
    )
    ended = Augmentation.objects.get(id=augmentation_id)
    assert (ended.status, ended.status_reason, ended.generator_file) == (
        "cancelled",
        "Cancelled during training; nothing was published and nothing was charged.",
        "",
    )
    assert not BudgetEntry.objects.filter(
        spender_kind="augmentation", spender_id=augmentation_id
    ).exists()
