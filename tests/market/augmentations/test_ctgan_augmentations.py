"""FAug with a CTGAN (tabular): raw seeds accepted, DP refused with a pointer to the MLP GAN, trained by the worker's
step without any budget entry, and published as generated rows (.npz, no pickle) to members."""

import numpy as np
import pytest

from market.augmentations.models import Augmentation, SeedUpload
from market.augmentations.training import augmentation_train
from market.budgets.models import BudgetEntry
from tests.conftest import api_client_for
from tests.market.augmentations.helpers import AUGMENTATION, open_augmentation, upload
from workers.algorithms.faug.copies import MAX_COPY_FRACTION, seed_copies
from workers.algorithms.faug.samples import samples_load

CTGAN = {**AUGMENTATION, "generator": "ctgan", "batch_size": 10}


def raw_seeds(index: int) -> dict:
    """Silo ``index`` lacks label 1: Adult-like raw numbers (age, hours, a 0/1 code), 4 of label 1, 6 of label 0."""
    rng = np.random.default_rng(index)
    labels = [1] * 4 + [0] * 6
    rows = np.column_stack(
        [rng.integers(20, 70, 10), rng.integers(10, 60, 10), np.array(labels) ^ (index % 2)]
    )
    return {"target_labels": [1], "labels": labels, "features": rows.tolist()}


def test_a_ctgan_augmentation_publishes_generated_rows_to_members_and_charges_nothing(
    operator_api, three_silos, media_root, settings
):
    settings.ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL = 6
    augmentation = open_augmentation(operator_api, generator="ctgan", batch_size=10)
    assert (augmentation["generator"], augmentation["private"]) == ("ctgan", False)
    assert augmentation["generator_display"].startswith("CTGAN")
    for index, user in enumerate(three_silos[:2]):
        response = upload(user, augmentation["id"], raw_seeds(index))
        assert response.status_code == 201, response.json()
    started = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert (started.status_code, started.json()["epsilon"]) == (202, None)
    augmentation_train(augmentation_id=augmentation["id"])  # the worker's step
    published = operator_api.get(f"/api/augmentations/{augmentation['id']}/").json()
    assert (published["status"], published["status_reason"]) == ("published", "")
    spec = published["generator_spec"]
    # How many of the 2 × 6 generated rows copy a seed row depends on the draw (its seed is the augmentation's
    # id); what is guaranteed is that the copies are dropped, counted, and at most half of them.
    rows, dropped = spec.pop("rows"), spec.pop("seed_copies_dropped")
    assert spec == {
        "architecture": "ctgan_samples",
        "n_features": 3,
        "n_classes": 2,
        "rows_per_label": 6,
        "near_copy_tolerance": 0.01,
    }
    assert rows + dropped == 12 and 0 <= dropped <= MAX_COPY_FRACTION * 12
    assert not BudgetEntry.objects.filter(
        spender_kind="augmentation", spender_id=augmentation["id"]
    ).exists()
    download = api_client_for(three_silos[2]).get(
        f"/api/augmentations/{augmentation['id']}/generator/"
    )
    assert download.status_code == 200
    assert download["Content-Disposition"].endswith(
        f'augmentation-{augmentation["id"]}-generator.npz"'
    )
    assert len(download.content) == published["generator_bytes"]
    features, labels = samples_load(download.content, n_classes=2)
    assert features.shape == (rows, 3) and labels.tolist() == sorted(labels.tolist())
    assert all(count <= 6 for count in np.bincount(labels, minlength=2))
    seeded = np.array(raw_seeds(0)["features"] + raw_seeds(1)["features"])
    assert (features >= seeded.min(axis=0)).all() and (features <= seeded.max(axis=0)).all()
    assert not seed_copies(features, seeded).any()  # no published row is a seed row, exact or near
    assert len(list((media_root / "generators").iterdir())) == 1


def every_binary_row(index: int) -> dict:
    """Silo ``index`` seeds all eight rows of three 0/1 columns, for label 1 and for label 0: whatever a CTGAN
    generates from these is one of them."""
    rows = [[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    return {"target_labels": [1], "labels": [1] * 8 + [0] * 8, "features": rows + rows}


def test_a_ctgan_that_would_publish_its_seed_rows_publishes_nothing_and_says_why(
    operator_api, three_silos, media_root, settings
):
    settings.ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL = 6
    augmentation = open_augmentation(operator_api, generator="ctgan", batch_size=10)
    for index, user in enumerate(three_silos[:2]):
        assert upload(user, augmentation["id"], every_binary_row(index)).status_code == 201
    assert operator_api.post(f"/api/augmentations/{augmentation['id']}/start/").status_code == 202
    augmentation_train(
        augmentation_id=augmentation["id"]
    )  # a real CTGAN, trained by the worker's step
    failed = operator_api.get(f"/api/augmentations/{augmentation['id']}/").json()
    assert (failed["status"], failed["status_reason"]) == (
        "failed",
        "Publication refused: 12 of the 12 generated rows copy a seed row (each column within 1% of its range "
        "over the seeds), more than 50%: the generator memorised its seeds, so nothing was published. Upload "
        "more seeds, or train fewer epochs.",
    )
    stored = Augmentation.objects.get(id=augmentation["id"])
    assert (stored.generator_file, stored.generator_spec, stored.generator_bytes) == (
        "",
        None,
        None,
    )
    assert not BudgetEntry.objects.filter(
        spender_kind="augmentation", spender_id=augmentation["id"]
    ).exists()
    download = api_client_for(three_silos[2]).get(
        f"/api/augmentations/{augmentation['id']}/generator/"
    )
    assert download.status_code == 409
    assert not (media_root / "generators").exists()


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            {"noise_multiplier": 1.0},
            "A CTGAN cannot be trained with DP-SGD (its discriminator's gradient penalty defeats per-example "
            "clipping); drop noise_multiplier and target_epsilon, or choose generator 'mlp_gan' for a DP "
            "generator.",
        ),
        (
            {"target_epsilon": 5.0},
            "A CTGAN cannot be trained with DP-SGD (its discriminator's gradient penalty defeats per-example "
            "clipping); drop noise_multiplier and target_epsilon, or choose generator 'mlp_gan' for a DP "
            "generator.",
        ),
        ({"generator": "vae"}, None),
    ],
)
def test_a_private_or_unknown_generator_is_refused_with_a_sentence(
    operator_api, three_silos, change, sentence
):
    response = operator_api.post("/api/augmentations/", {**CTGAN, **change}, format="json")
    assert response.status_code == 400
    if sentence is not None:
        assert response.json()["detail"] == sentence
    else:
        assert "vae" in str(response.json())
    assert not Augmentation.objects.exists()


def test_a_federation_without_l0_refuses_a_ctgan(operator_api, federation_with_data):
    federation_with_data.allowed_privacy_levels = ["L1", "L2"]
    federation_with_data.save()
    response = operator_api.post("/api/augmentations/", CTGAN, format="json")
    assert (response.status_code, response.json()["detail"]) == (
        400,
        "'adult-income' does not allow training without noise (L0); give noise_multiplier or target_epsilon "
        "for the DP discriminator of generator 'mlp_gan' (a CTGAN cannot be DP).",
    )


def test_ctgan_seeds_are_raw_numbers_but_bounded_and_the_mlp_gan_keeps_0_to_1(
    operator_api, three_silos
):
    tabular = open_augmentation(operator_api, generator="ctgan")
    too_big = raw_seeds(0)
    too_big["features"][2][0] = 1e12
    refused = upload(three_silos[0], tabular["id"], too_big)
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "Seed row 2 holds a value that is not a number in [-1e+09, 1e+09].",
    )
    image = open_augmentation(operator_api)
    assert upload(three_silos[0], image["id"], raw_seeds(0)).status_code == 400
    assert upload(three_silos[0], tabular["id"], raw_seeds(0)).status_code == 201
    assert SeedUpload.objects.count() == 1
