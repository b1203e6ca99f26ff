"""Federated augmentation's conditional generator (the workers.algorithms.faug package)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from workers.algorithms.faug.generator import (
    fill_missing_labels,
    load_generator,
    save_generator,
    target_labels_of,
)
from workers.algorithms.faug.leakage import device_server_leakage, inter_device_leakage
from workers.algorithms.faug.training import (
    GanSetting,
    GeneratorPrivacy,
    TrainingCancelled,
    train_generator,
)
from workers.algorithms.faug.work import STEP_WORK, generator_training_work
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound

TINY = GanSetting(
    latent_size=4,
    generator_hidden_sizes=(8,),
    discriminator_hidden_sizes=(8,),
    epochs=2,
    batch_size=8,
)


@pytest.fixture(scope="module")
def seeds():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 12)
    features = np.clip(rng.normal(0.2 + 0.3 * labels[:, None], 0.05, size=(36, 6)), 0, 1).astype(
        np.float32
    )
    return features, labels


def test_leakage_is_the_papers_fraction():
    assert device_server_leakage(5, 15) == 0.25
    assert device_server_leakage(3, 0) == 1.0
    for n_target, n_redundant in ((0, 4), (2, -1), (1.5, 2), (True, 1)):
        with pytest.raises(ValueError):
            device_server_leakage(n_target, n_redundant)


def test_inter_device_leakage_is_a_silos_share_of_the_pooled_seeds():
    assert inter_device_leakage(5, 100) == 0.05
    # one silo alone: the other silos would learn what the server learns
    assert inter_device_leakage(5, 20) == device_server_leakage(5, 15)
    # ten silos uploading alike: a tenth of the device–server leakage
    assert inter_device_leakage(15, 10 * 30) == pytest.approx(device_server_leakage(15, 15) / 10)
    for n_target, n_pooled in ((0, 4), (5, 4), (1.5, 2), (True, 1), (1, 2.0)):
        with pytest.raises(ValueError):
            inter_device_leakage(n_target, n_pooled)


def test_generate_has_the_asked_shapes_and_labels(seeds):
    generator = train_generator(*seeds, n_classes=3, setting=TINY, seed=1)
    features, labels = generator.generate([2, 0], 5, seed=3)
    assert features.shape == (10, 6) and features.dtype == np.float32
    assert ((features >= 0) & (features <= 1)).all()
    assert labels.tolist() == [2] * 5 + [0] * 5
    for bad in ([3], [-1], [[0]]):
        with pytest.raises(ValueError):
            generator.generate(bad, 2, seed=0)


def test_training_and_generation_are_deterministic_under_a_seed(seeds):
    first = train_generator(*seeds, n_classes=3, setting=TINY, seed=7).generate(
        [0, 1, 2], 4, seed=2
    )[0]
    second = train_generator(*seeds, n_classes=3, setting=TINY, seed=7).generate(
        [0, 1, 2], 4, seed=2
    )[0]
    other = train_generator(*seeds, n_classes=3, setting=TINY, seed=8).generate(
        [0, 1, 2], 4, seed=2
    )[0]
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


def test_safetensors_round_trip_keeps_the_generator(seeds):
    generator = train_generator(*seeds, n_classes=3, setting=TINY, seed=1)
    data = save_generator(generator)
    assert not data.startswith(b"\x80")  # not a pickle
    loaded = load_generator(data)
    assert loaded.spec == generator.spec and loaded.privacy is None
    np.testing.assert_array_equal(
        loaded.generate([1], 3, seed=5)[0], generator.generate([1], 3, seed=5)[0]
    )


def test_load_refuses_a_spec_that_does_not_match_the_tensors(seeds):
    from safetensors.torch import load, save

    data = save_generator(train_generator(*seeds, n_classes=3, setting=TINY, seed=1))
    spec = {**load_generator(data).spec, "latent_size": 5}
    with pytest.raises(ValueError, match="tensors must be exactly"):
        load_generator(save(load(data), metadata={"spec": json.dumps(spec)}))
    with pytest.raises(ValueError, match="architecture"):
        load_generator(
            save(load(data), metadata={"spec": json.dumps({**spec, "architecture": "mlp"})})
        )
    with pytest.raises(ValueError):
        load_generator(b"\x80\x04not safetensors")


def test_the_dp_generator_reports_epsilon_from_the_shared_accountant(seeds):
    privacy = GeneratorPrivacy(noise_multiplier=1.5, max_grad_norm=1.0, delta=1e-5)
    generator = train_generator(*seeds, n_classes=3, setting=TINY, seed=1, privacy=privacy)
    expected = DpSgdParameters(
        noise_multiplier=1.5, max_grad_norm=1.0, batch_size=8, epochs=2, n_examples=36, delta=1e-5
    )
    assert generator.privacy == expected
    assert generator.privacy_report.epsilon == dp_sgd_privacy_bound(expected)[0].epsilon
    assert generator.generate([0], 2, seed=0)[0].shape == (2, 6)
    loaded = load_generator(
        save_generator(generator)
    )  # the declaration travels and is re-accounted
    assert (
        loaded.privacy == expected
        and loaded.privacy_report.epsilon == generator.privacy_report.epsilon
    )


def test_a_target_epsilon_is_met(seeds):
    generator = train_generator(
        *seeds, n_classes=3, setting=TINY, seed=1, privacy=GeneratorPrivacy(target_epsilon=4.0)
    )
    assert 3.9 < generator.privacy_report.epsilon <= 4.0


def test_seeds_outside_the_unit_range_or_labels_are_refused(seeds):
    features, labels = seeds
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        train_generator(features * 3, labels, n_classes=3, setting=TINY, seed=0)
    with pytest.raises(ValueError, match="labels"):
        train_generator(features, labels + 1, n_classes=3, setting=TINY, seed=0)


def test_fill_missing_labels_appends_generated_target_samples(seeds):
    features, labels = seeds
    generator = train_generator(features, labels, n_classes=3, setting=TINY, seed=1)
    local_x, local_y = features[labels != 1], labels[labels != 1]
    assert target_labels_of(local_y, 3, below=1) == [1]
    mixed_x, mixed_y = fill_missing_labels(local_x, local_y, generator, [1], per_label=7, seed=0)
    assert mixed_x.shape == (len(local_x) + 7, 6) and (mixed_y == 1).sum() == 7


@pytest.fixture(scope="module")
def public_rows():
    rng = np.random.default_rng(1)
    return np.clip(rng.normal(0.5, 0.2, size=(20, 6)), 0, 1).astype(np.float32)


def test_public_pretraining_changes_the_generator_deterministically(seeds, public_rows):
    def samples(setting, public):
        trained = train_generator(
            *seeds, n_classes=3, setting=setting, seed=7, public_features=public
        )
        return trained.generate([0, 1, 2], 4, seed=2)[0]

    with_public = samples(TINY, public_rows)
    np.testing.assert_array_equal(with_public, samples(TINY, public_rows))
    assert not np.array_equal(with_public, samples(TINY, None))
    # no public epochs: exactly the generator trained without public rows
    no_epochs = GanSetting(**{**TINY.__dict__, "public_epochs": 0})
    np.testing.assert_array_equal(samples(no_epochs, public_rows), samples(no_epochs, None))


def test_public_pretraining_leaves_the_dp_run_and_its_epsilon_unchanged(seeds, public_rows):
    privacy = GeneratorPrivacy(noise_multiplier=1.5, max_grad_norm=1.0, delta=1e-5)
    without = train_generator(*seeds, n_classes=3, setting=TINY, seed=1, privacy=privacy)
    with_public = train_generator(
        *seeds, n_classes=3, setting=TINY, seed=1, privacy=privacy, public_features=public_rows
    )
    assert with_public.privacy == without.privacy
    assert with_public.privacy_report.epsilon == without.privacy_report.epsilon
    # a target ε solves the same σ: the public rows are not counted as seeds
    targeted = [
        train_generator(
            *seeds,
            n_classes=3,
            setting=TINY,
            seed=1,
            privacy=GeneratorPrivacy(target_epsilon=4.0),
            public_features=public,
        )
        for public in (None, public_rows)
    ]
    assert targeted[0].privacy == targeted[1].privacy
    assert targeted[1].privacy.n_examples == len(seeds[1])


def test_public_rows_of_another_shape_or_range_are_refused(seeds, public_rows):
    for bad, match in (
        (public_rows[:, :5], "matrix"),
        (public_rows[:0], "matrix"),
        (public_rows * 3, r"\[0, 1\]"),
    ):
        with pytest.raises(ValueError, match=match):
            train_generator(*seeds, n_classes=3, setting=TINY, seed=0, public_features=bad)


def test_the_training_work_counts_each_steps_fixed_cost_and_its_rows_through_the_networks():
    # 2 epochs × ceil(10 / 4) = 6 steps, each STEP_WORK plus 4 rows × 3 passes × (6 + 3 + 256) / 10
    assert generator_training_work(
        n_seeds=10, n_features=6, n_classes=3, epochs=2, batch_size=4
    ) == 6 * (STEP_WORK + 4 * 3 * 26.5)
    # DP-SGD: 50 plain passes a row; a CTGAN: 11 columns a feature; public rows: plain steps of their own
    assert generator_training_work(
        n_seeds=10, n_features=6, n_classes=3, epochs=2, batch_size=4, private=True
    ) == 6 * (STEP_WORK + 4 * 3 * 26.5 * 50)
    assert generator_training_work(
        n_seeds=10, n_features=6, n_classes=3, epochs=2, batch_size=4, tabular=True
    ) == pytest.approx(6 * (STEP_WORK + 4 * 3 * (66 + 3 + 256) / 10))
    assert generator_training_work(
        n_seeds=10, n_features=6, n_classes=3, epochs=2, batch_size=4, n_public=8, public_epochs=1
    ) == 6 * (STEP_WORK + 4 * 3 * 26.5) + 2 * (STEP_WORK + 4 * 3 * 26.5)
    # batches of one: the fixed cost dominates, 1,000 epochs over 4,000 seeds are 4·10⁶ steps
    assert generator_training_work(
        n_seeds=4000, n_features=4, n_classes=3, epochs=1000, batch_size=1
    ) == pytest.approx(4_000_000 * (STEP_WORK + 3 * 26.3))


@pytest.mark.parametrize("privacy", [None, GeneratorPrivacy(noise_multiplier=1.0)])
def test_a_training_asks_before_every_step_and_stops_when_told(seeds, privacy):
    asked = []

    def stop_requested() -> bool:
        asked.append(True)
        return len(asked) == 3

    with pytest.raises(TrainingCancelled, match="The training was cancelled."):
        train_generator(
            *seeds,
            n_classes=3,
            setting=TINY,
            seed=1,
            privacy=privacy,
            stop_requested=stop_requested,
        )
    assert len(asked) == 3  # stopped before its third step: no step ran after the answer


def test_a_training_never_told_to_stop_asks_once_a_step(seeds):
    asked = []
    train_generator(
        *seeds, n_classes=3, setting=TINY, seed=1, stop_requested=lambda: asked.append(1) or False
    )
    assert len(asked) == 2 * 5  # 2 epochs of ceil(36 / 8) steps


def test_the_leakages_work_estimate_and_samples_file_load_no_torch():
    """The market shows leakages and prices a training in its web processes: they must not pay for torch."""
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, workers.algorithms.faug.leakage, workers.algorithms.faug.work, "
            "workers.algorithms.faug.samples; print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.strip() == "False"
