"""FAug through the API: seeds validated and seen only by their silo, the leakage shown, the generator's training
started by an operator with its DP ε reserved (or refused), then published and charged, or failed and released."""

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.utils import timezone

from market.audit.models import AuditEvent
from market.augmentations.models import Augmentation, AugmentationOutbox, SeedUpload
from market.augmentations.training import augmentation_reap, augmentation_train
from market.budgets.models import BudgetEntry, PrivacyBudget
from tests.conftest import api_client_for, scaled_timeout, wait_until
from tests.market.augmentations.helpers import (
    AUGMENTATION,
    N_FEATURES,
    open_augmentation,
    seeds,
    upload,
)
from workers.algorithms.faug.generator import load_generator


def test_each_silo_sees_its_own_seeds_and_leakage_and_the_operator_sees_every_count(
    operator_api, three_silos
):
    augmentation = open_augmentation(operator_api)
    for index, user in enumerate(three_silos):
        response = upload(user, augmentation["id"], seeds(index))
        assert response.status_code == 201, response.json()
    assert response.json() == {
        "organisation": "Silo 2",
        "n_seeds": 4,
        "n_target": 2,
        "n_redundant": 2,
        "leakage": 0.5,
        "n_pooled": 9,  # 2 + 3 + 4 seeds
        "inter_device_leakage": 2 / 9,
        "target_labels": [1],
    }
    own = api_client_for(three_silos[1]).get(f"/api/augmentations/{augmentation['id']}/").json()
    assert [
        (item["organisation"], item["leakage"], item["inter_device_leakage"])
        for item in own["seeds"]
    ] == [("Silo 1", 2 / 3, 2 / 9)]
    every = operator_api.get(f"/api/augmentations/{augmentation['id']}/").json()["seeds"]
    assert [
        (item["n_seeds"], item["leakage"], item["inter_device_leakage"], item["target_labels"])
        for item in every
    ] == [
        (2, 1.0, 2 / 9, None),
        (3, 2 / 3, 2 / 9, None),
        (4, 0.5, 2 / 9, None),
    ]
    preview = api_client_for(three_silos[0]).post(
        f"/api/augmentations/{augmentation['id']}/leakage/",
        {"target_labels": [1], "labels": [1, 0, 0, 0]},
        format="json",
    )
    assert preview.json() == {"n_target": 1, "n_redundant": 3, "leakage": 0.25}


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            {"target_labels": []},
            "'target_labels' must be a non-empty list of distinct class indices in 0 .. 1.",
        ),
        (
            {"target_labels": [2]},
            "'target_labels' must be a non-empty list of distinct class indices in 0 .. 1.",
        ),
        (
            {"target_labels": [1, 1]},
            "'target_labels' must be a non-empty list of distinct class indices in 0 .. 1.",
        ),
        ({"labels": [1, True]}, "Every seed's label must be a class index in 0 .. 1."),
        (
            {"labels": [0, 0]},
            "Upload at least one seed of each target label; none of [1] is among your seeds.",
        ),
        (
            {"features": [[0.1, 0.2, 0.3]]},
            "'features' must be a list of 2 rows, one per label, not 1.",
        ),
        ({"features": "rows"}, "'features' must be a list of 2 rows, one per label, not str."),
        (
            {"features": [[0.1, 0.2, 0.3], [0.1, 0.2]]},
            "Seed row 1 must be a list of 3 numbers, as augmentation #{id} expects.",
        ),
        (
            {"features": [[0.1, 0.2, 0.3], [0.1, 0.2, 1.5]]},
            "Seed row 1 holds a value that is not a number in [0, 1].",
        ),
        (
            {"features": [[0.1, 0.2, "0.3"], [0.1, 0.2, 0.3]]},
            "Seed row 0 holds a value that is not a number in [0, 1].",
        ),
    ],
)
def test_bad_seeds_are_refused_with_a_sentence_and_nothing_stored(
    operator_api, three_silos, change, sentence
):
    augmentation = open_augmentation(operator_api)
    response = upload(three_silos[0], augmentation["id"], {**seeds(0), **change})
    assert (response.status_code, response.json()["detail"]) == (
        400,
        sentence.format(id=augmentation["id"]),
    )
    assert SeedUpload.objects.count() == 0


def test_seed_counts_are_bounded_by_settings_and_a_second_upload_is_refused(
    operator_api, three_silos, settings
):
    settings.ONEFOLD_FAUG_MAX_SEEDS = 3
    augmentation = open_augmentation(operator_api, batch_size=2)
    too_many = upload(three_silos[0], augmentation["id"], seeds(2))
    assert (too_many.status_code, too_many.json()["detail"]) == (
        400,
        "'labels' must be a list of 1 to 3 class indices, one per seed.",
    )
    assert upload(three_silos[0], augmentation["id"], seeds(1)).status_code == 201
    again = upload(three_silos[0], augmentation["id"], seeds(1))
    assert (again.status_code, again.json()["detail"]) == (
        409,
        f"Your organisation already uploaded seeds to augmentation #{augmentation['id']}.",
    )
    assert SeedUpload.objects.count() == 1


def test_only_operators_open_and_start_and_only_members_see_an_augmentation(
    silo_api, operator_api, three_silos, other_silo_user, federation_with_data
):
    refused = silo_api.post("/api/augmentations/", AUGMENTATION, format="json")
    assert (refused.status_code, refused.json()["detail"]) == (
        403,
        "Only operators open federated augmentations.",
    )
    augmentation = open_augmentation(operator_api)
    outsider = upload(other_silo_user, augmentation["id"], seeds(0))
    assert outsider.status_code == 404  # not a member: the augmentation does not exist for it
    start = silo_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert (start.status_code, start.json()["detail"]) == (
        403,
        "Only operators start a generator's training.",
    )
    empty = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert (empty.status_code, empty.json()["detail"]) == (
        409,
        f"No silo has uploaded seeds to augmentation #{augmentation['id']} yet.",
    )
    federation_with_data.allowed_privacy_levels = ["L1", "L2"]
    federation_with_data.save()
    no_noise = operator_api.post("/api/augmentations/", AUGMENTATION, format="json")
    assert (no_noise.status_code, no_noise.json()["detail"]) == (
        400,
        "'adult-income' does not allow training without noise (L0); give noise_multiplier or target_epsilon "
        "for the DP discriminator.",
    )


def test_a_dp_generator_is_reserved_at_start_then_charged_to_every_contributing_silo(
    operator_api, three_silos, media_root
):
    augmentation = open_augmentation(operator_api, noise_multiplier=1.0)
    for index, user in enumerate(three_silos[:2]):  # the third silo contributes nothing
        assert upload(user, augmentation["id"], seeds(index)).status_code == 201
    started = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert started.status_code == 202, started.json()
    epsilon = started.json()["epsilon"]
    assert started.json()["status"] == "queued" and epsilon > 0
    reserved = BudgetEntry.objects.filter(
        kind="reserve", spender_kind="augmentation", spender_id=augmentation["id"]
    )
    assert sorted(reserved.values_list("budget__organisation__name", flat=True)) == [
        "Northwind Hospital",
        "Silo 1",
    ]
    augmentation_train(augmentation_id=augmentation["id"])  # the worker's step
    published = operator_api.get(f"/api/augmentations/{augmentation['id']}/").json()
    assert (published["status"], published["epsilon"]) == ("published", epsilon)
    charged = BudgetEntry.objects.filter(
        kind="charge", spender_kind="augmentation", spender_id=augmentation["id"]
    )
    assert charged.count() == 2 and PrivacyBudget.objects.filter(reserved__gt=0).count() == 0
    assert {budget.spent for budget in PrivacyBudget.objects.filter(spent__gt=0)} == {
        reserved.first().epsilon
    }
    download = api_client_for(three_silos[2]).get(
        f"/api/augmentations/{augmentation['id']}/generator/"
    )
    assert download.status_code == 200
    generator = load_generator(download.content)
    assert generator.spec == published["generator_spec"]
    assert generator.privacy_report.epsilon == pytest.approx(epsilon)
    features, labels = generator.generate([1], 5, seed=0)
    assert features.shape == (5, N_FEATURES) and labels.tolist() == [1] * 5


def test_a_start_that_would_overspend_a_silo_is_refused_and_nothing_is_written(
    operator_api, three_silos
):
    augmentation = open_augmentation(operator_api, noise_multiplier=0.3, epochs=50)
    assert upload(three_silos[0], augmentation["id"], seeds(0)).status_code == 201
    refused = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith(
        "Northwind Hospital's privacy budget in 'adult-income' has ε = 10.000000 left, but the DP generator "
        f"of augmentation #{augmentation['id']} needs ε = "
    )
    assert Augmentation.objects.get(id=augmentation["id"]).status == "collecting"
    assert (
        BudgetEntry.objects.filter(
            spender_kind="augmentation", spender_id=augmentation["id"]
        ).count()
        == 0
    )
    assert AuditEvent.objects.filter(action="budget.refused").count() == 1


def test_a_failed_training_releases_the_reservation_and_charges_nothing(operator_api, three_silos):
    augmentation = open_augmentation(operator_api, target_epsilon=5.0)
    assert upload(three_silos[0], augmentation["id"], seeds(0)).status_code == 201
    assert operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202
    SeedUpload.objects.update(features=b"\x00" * 5)  # a stored row that no longer reads back
    augmentation_train(augmentation_id=augmentation["id"])
    failed = Augmentation.objects.get(id=augmentation["id"])
    assert failed.status == "failed" and failed.status_reason.startswith(
        "Training the generator failed"
    )
    assert list(
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=failed.id)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "release"]
    [budget] = PrivacyBudget.objects.all()
    assert (budget.spent, budget.reserved) == (Decimal(0), Decimal(0))
    download = operator_api.get(f"/api/augmentations/{augmentation['id']}/generator/")
    assert download.status_code == 409


def test_the_reaper_republishes_a_lost_start_and_fails_a_training_whose_worker_died(
    operator_api, three_silos, settings
):
    first, second = (open_augmentation(operator_api, noise_multiplier=1.0) for _ in range(2))
    for silo, augmentation in zip(three_silos, (first, second)):  # one silo each: ε fits both
        assert upload(silo, augmentation["id"], seeds(0)).status_code == 201
        assert (
            operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202
        )
    long_ago = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 1)
    AugmentationOutbox.objects.update(published_at=long_ago)  # a broker that lost both messages
    Augmentation.objects.filter(id=second["id"]).update(
        status="training", training_started_at=long_ago
    )  # a worker that died while training
    assert augmentation_reap() == {"republished": 1, "failed": 1, "cancelled": 0}
    assert AugmentationOutbox.objects.filter(augmentation_id=first["id"]).count() == 2
    died = Augmentation.objects.get(id=second["id"])
    assert died.status == "failed" and "nothing was charged" in died.status_reason
    assert list(
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=died.id)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "release"]


def test_a_generator_pretrained_on_public_data_is_published_with_the_same_epsilon(
    operator_api, three_silos, operator, media_root
):
    from market.federations.models import Federation
    from market.federations.services import public_dataset_upload

    federation = Federation.objects.get(slug="adult-income")
    rows = np.random.default_rng(5).uniform(size=(40, N_FEATURES)).round(3)
    public_csv = "a,b,c\n" + "\n".join(",".join(map(str, row)) for row in rows)
    public_dataset = public_dataset_upload(
        federation=federation, data=public_csv.encode(), uploaded_by=operator
    )
    epsilons = []
    for use_public_data in (True, False):
        augmentation = open_augmentation(
            operator_api, noise_multiplier=1.0, use_public_data=use_public_data
        )
        assert (augmentation["use_public_data"], augmentation["public_dataset"]) == (
            (True, public_dataset.id) if use_public_data else (False, None)
        )
        for index, user in enumerate(three_silos):
            assert upload(user, augmentation["id"], seeds(index)).status_code == 201
        started = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
        assert started.status_code == 202, started.json()
        augmentation_train(augmentation_id=augmentation["id"])
        published = operator_api.get(f"/api/augmentations/{augmentation['id']}/").json()
        assert published["status"] == "published", published["status_reason"]
        epsilons.append((started.json()["epsilon"], published["epsilon"]))
    # the public rows cost no ε: the same seeds and σ give the same reserved and charged ε
    assert epsilons[0] == epsilons[1]


def test_public_data_the_gan_cannot_read_is_refused_with_a_sentence(
    operator_api, three_silos, operator, media_root
):
    from market.federations.models import Federation

    public_dataset = Federation.objects.get(slug="adult-income").public_datasets.first()
    n_columns = len(public_dataset.feature_spec["columns"])
    for changes, sentence in (
        ({}, f"The public data has {n_columns} columns but seed rows have {N_FEATURES} features"),
        ({"n_features": n_columns}, "the MLP GAN pretrains only on values in [0, 1]"),
        ({"generator": "ctgan"}, "Only the MLP GAN pretrains on the public data"),
    ):
        response = operator_api.post(
            "/api/augmentations/",
            {**AUGMENTATION, **changes, "use_public_data": True},
            format="json",
        )
        assert response.status_code == 400 and sentence in response.json()["detail"], (
            response.json()
        )
    assert not Augmentation.objects.exists()


def test_a_start_whose_training_exceeds_the_work_limit_is_refused_before_any_reservation(
    operator_api, three_silos, settings
):
    # the attack: 1,000 epochs in batches of one over 1,000 seeds, a million steps (hours of one worker)
    augmentation = open_augmentation(operator_api, epochs=1000, batch_size=1, noise_multiplier=1.0)
    rows = np.random.default_rng(0).uniform(size=(1000, N_FEATURES)).round(3)
    many = {"target_labels": [1], "labels": [1] * 500 + [0] * 500, "features": rows.tolist()}
    assert upload(three_silos[0], augmentation["id"], many).status_code == 201
    budgets_before = list(PrivacyBudget.objects.values_list("id", "spent", "reserved"))
    refused = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    # 10⁶ steps × (20,000 + 1 row × 3 passes × (3 features + 2 classes + 256) / 10 × 50 under DP-SGD)
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "Training this generator on the 1000 pooled seeds would need about 2.39e+10 row-passes of work "
        "(1000 epochs in batches of 1: every step costs a fixed amount besides its rows), above this "
        "market's limit of 5e+09; cancel it and open one with fewer epochs or larger batches.",
    )
    unchanged = Augmentation.objects.get(id=augmentation["id"])
    assert (unchanged.status, unchanged.privacy_report, unchanged.started_at) == (
        "collecting",
        None,
        None,
    )
    assert not BudgetEntry.objects.exists() and not AugmentationOutbox.objects.exists()
    assert list(PrivacyBudget.objects.values_list("id", "spent", "reserved")) == budgets_before
    assert not AuditEvent.objects.filter(action="augmentation.started").exists()
    settings.ONEFOLD_FAUG_MAX_WORK = 1_000_000 * (
        20_000 + 3 * 26.1 * 50
    )  # the limit itself is allowed
    assert operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202


def test_the_page_refuses_a_start_over_the_work_limit_with_the_same_sentence(
    client, operator, operator_api, three_silos, settings
):
    augmentation = open_augmentation(operator_api)
    assert upload(three_silos[0], augmentation["id"], seeds(0)).status_code == 201
    settings.ONEFOLD_FAUG_MAX_WORK = 1000  # below one step
    client.force_login(operator)
    refused = client.post(f"/augmentations/{augmentation['id']}/start/")
    assert refused.status_code == 400
    # 2 epochs × 1 step × (20,000 + 4 rows × 3 passes × (3 + 2 + 256) / 10): L0, no DP-SGD
    assert (
        "Training this generator on the 2 pooled seeds would need about 4.06e+04 row-passes of work "
        "(2 epochs in batches of 4: every step costs a fixed amount besides its rows), above this "
        "market&#x27;s limit of 1e+03; cancel it and open one with fewer epochs or larger batches."
    ) in refused.content.decode()
    assert Augmentation.objects.get(id=augmentation["id"]).status == "collecting"
    assert not AugmentationOutbox.objects.exists()


def test_cancelling_before_training_ends_the_augmentation_at_once_and_releases_its_reservation(
    operator_api, three_silos
):
    collecting = open_augmentation(operator_api)
    queued = open_augmentation(operator_api, noise_multiplier=1.0)
    assert upload(three_silos[0], queued["id"], seeds(0)).status_code == 201
    assert operator_api.post(f"/api/augmentations/{queued['id']}/start/").status_code == 202
    for augmentation in (collecting, queued):
        cancelled = operator_api.post(f"/api/augmentations/{augmentation['id']}/cancel/")
        assert cancelled.status_code == 202, cancelled.json()
        assert (cancelled.json()["status"], cancelled.json()["status_reason"]) == (
            "cancelled",
            "Cancelled by olivia-operator before training.",
        )
    assert list(
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=queued["id"])
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "release"]
    assert PrivacyBudget.objects.filter(reserved__gt=0).count() == 0
    augmentation_train(augmentation_id=queued["id"])  # its queued message arrives: nothing runs
    assert Augmentation.objects.get(id=queued["id"]).status == "cancelled"
    again = operator_api.post(f"/api/augmentations/{queued['id']}/cancel/")
    assert (again.status_code, again.json()["detail"]) == (
        409,
        f"Augmentation #{queued['id']} is already cancelled; there is nothing to cancel.",
    )
    late = upload(three_silos[1], collecting["id"], seeds(1))
    assert (
        late.status_code == 409
        and not SeedUpload.objects.filter(augmentation_id=collecting["id"]).exists()
    )
    assert AuditEvent.objects.filter(action="augmentation.cancelled").count() == 2


def test_only_operators_cancel_an_augmentation(operator_api, three_silos):
    augmentation = open_augmentation(operator_api)
    refused = api_client_for(three_silos[0]).post(
        f"/api/augmentations/{augmentation['id']}/cancel/"
    )
    assert (refused.status_code, refused.json()["detail"]) == (
        403,
        "Only operators cancel a federated augmentation.",
    )
    assert Augmentation.objects.get(id=augmentation["id"]).status == "collecting"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_through_the_api_stops_a_training_between_two_steps_and_releases(
    operator_api, three_silos, media_root
):
    """The worker's step runs in a thread, as a worker would, on a training of 2,700 DP-SGD steps (seconds to minutes);
    the cancel API asks it to stop and it stops at its next check of the row."""
    import threading

    from django.db import connection

    augmentation = open_augmentation(operator_api, noise_multiplier=5.0, epochs=300, batch_size=1)
    for index, user in enumerate(three_silos):
        assert upload(user, augmentation["id"], seeds(index)).status_code == 201
    assert operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202

    def work() -> None:
        try:
            augmentation_train(augmentation_id=augmentation["id"])
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    try:
        wait_until(
            lambda: Augmentation.objects.get(id=augmentation["id"]).status == "training",
            timeout=scaled_timeout(60),
            message="the training never started",
        )
        requested = operator_api.post(f"/api/augmentations/{augmentation['id']}/cancel/")
        assert requested.status_code == 202, requested.json()
        assert requested.json()["status"] == "training" and requested.json()["cancel_requested_at"]
        worker.join(scaled_timeout(60))
        assert not worker.is_alive(), "the training did not stop at its next step"
    finally:
        if worker.is_alive():  # never leave a thread on the database behind a failed assertion
            Augmentation.objects.filter(id=augmentation["id"]).update(status="failed")
            worker.join()
    ended = Augmentation.objects.get(id=augmentation["id"])
    assert (ended.status, ended.status_reason, ended.generator_file) == (
        "cancelled",
        "Cancelled during training; nothing was published and nothing was charged.",
        "",
    )
    assert (
        list(
            BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=ended.id)
            .order_by("id")
            .values_list("kind", flat=True)
        )
        == ["reserve"] * 3 + ["release"] * 3
    )
    assert PrivacyBudget.objects.filter(reserved__gt=0).count() == 0
    assert PrivacyBudget.objects.filter(spent__gt=0).count() == 0


def test_the_reaper_cancels_a_training_whose_worker_stopped_checking(
    operator_api, three_silos, settings
):
    augmentation = open_augmentation(operator_api, noise_multiplier=1.0)
    assert upload(three_silos[0], augmentation["id"], seeds(0)).status_code == 201
    assert operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202
    Augmentation.objects.filter(id=augmentation["id"]).update(
        status="training", training_started_at=timezone.now()
    )  # claimed by a worker that then died
    first, again = (
        operator_api.post(f"/api/augmentations/{augmentation['id']}/cancel/") for _ in range(2)
    )
    assert (first.status_code, again.status_code) == (
        202,
        202,
    )  # a resubmitted request changes nothing
    assert first.json()["cancel_requested_at"] == again.json()["cancel_requested_at"] is not None
    assert AuditEvent.objects.filter(action="augmentation.cancelled").count() == 1
    # within ONEFOLD_JOB_LEASE_SECONDS of the request a live worker may still stop it
    assert augmentation_reap() == {"republished": 0, "failed": 0, "cancelled": 0}
    Augmentation.objects.filter(id=augmentation["id"]).update(
        cancel_requested_at=timezone.now()
        - timedelta(seconds=settings.ONEFOLD_JOB_LEASE_SECONDS + 1)
    )
    assert augmentation_reap() == {"republished": 0, "failed": 0, "cancelled": 1}
    ended = Augmentation.objects.get(id=augmentation["id"])
    assert ended.status == "cancelled" and "no longer answered" in ended.status_reason
    assert list(
        BudgetEntry.objects.filter(spender_kind="augmentation", spender_id=ended.id)
        .order_by("id")
        .values_list("kind", flat=True)
    ) == ["reserve", "release"]
