"""FAug's tabular generator: a CTGAN trained on a few Adult rows, sampled conditionally on each label, and its rows
written and read back without pickle."""

import numpy as np
import pytest

from workers.algorithms.faug.copies import SeedCopiesError, drop_seed_copies, seed_copies
from workers.algorithms.faug.samples import samples_load, samples_save
from workers.algorithms.faug.tabular import TabularSetting, discrete_columns, tabular_samples
from workers.algorithms.faug.training import TrainingCancelled

NUMERIC = ["age", "educational-num", "capital-gain", "hours-per-week"]
TINY = TabularSetting(epochs=2, batch_size=20, embedding_dim=8, hidden_sizes=(16,))


@pytest.fixture(scope="module")
def adult_seeds(adult_frame):
    """120 Adult rows: 4 numeric columns and gender as a code (0/1), income > 50K as label 1."""
    rows = adult_frame.sample(120, random_state=0)
    features = np.column_stack(
        [rows[NUMERIC].to_numpy(dtype=np.float64), (rows["gender"] == "Male").to_numpy(float)]
    )
    return features, rows["income"].str.contains(">").to_numpy(dtype=np.int64)


def test_columns_of_few_integer_values_are_discrete():
    features = np.array([[0, 1.5, 3, 7], [1, 2.5, 40, 7], [1, 3.0, 12, 7.0]] * 4)
    features[:, 2] = np.arange(12)  # 12 distinct integers: a count CTGAN models as continuous
    assert discrete_columns(features) == [0, 3]


def test_a_ctgan_generates_rows_of_each_seeded_label_in_the_seeds_range_and_reproducibly(
    adult_seeds,
):
    features, labels = adult_seeds
    generated, generated_labels = tabular_samples(
        features, labels, n_classes=2, rows_per_label=7, setting=TINY, seed=3
    )
    assert generated.dtype == np.float32 and generated.shape == (14, 5)
    assert generated_labels.tolist() == [0] * 7 + [1] * 7
    assert (generated >= features.min(axis=0)).all() and (generated <= features.max(axis=0)).all()
    assert set(np.unique(generated[:, 4])) <= {0.0, 1.0}  # gender stays a category
    again, _ = tabular_samples(
        features, labels, n_classes=2, rows_per_label=7, setting=TINY, seed=3
    )
    assert np.array_equal(generated, again)
    read, read_labels = samples_load(samples_save(generated, generated_labels), n_classes=2)
    assert np.array_equal(read, generated) and np.array_equal(read_labels, generated_labels)


def test_a_ctgan_asks_after_every_optimiser_step_and_stops_when_told(adult_seeds):
    import torch

    asked = []

    def stop_requested() -> bool:
        asked.append(True)
        return len(asked) == 3

    with pytest.raises(TrainingCancelled, match="The training was cancelled."):
        tabular_samples(
            *adult_seeds,
            n_classes=2,
            rows_per_label=7,
            setting=TINY,
            seed=3,
            stop_requested=stop_requested,
        )
    assert (
        len(asked) == 3
    )  # the discriminator's step, the generator's, then the next discriminator's
    weight = torch.nn.Parameter(torch.ones(1))
    weight.sum().backward()
    torch.optim.SGD([weight], lr=0.1).step()  # the check is gone once the fit has stopped
    assert len(asked) == 3


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"features": np.zeros((2, 3), np.float32)}, "holds exactly the arrays"),
        (
            {"features": np.zeros((2, 3), np.float32), "labels": np.array([0, 5])},
            "labels must lie in 0 .. 1",
        ),
        (
            {"features": np.full((1, 3), np.nan, np.float32), "labels": np.array([0])},
            "NaN or infinite",
        ),
        (
            {"features": np.array([["a"]]), "labels": np.array([0])},
            "float32 (n, n_features) matrix",
        ),
        (
            {"features": np.zeros((1, 1), np.float32), "labels": np.array([{}], dtype=object)},
            "not a readable .npz without pickle",
        ),
    ],
)
def test_a_bad_samples_file_is_refused_with_a_sentence_and_never_unpickled(
    arrays, message, tmp_path
):
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        samples_load(buffer.getvalue(), n_classes=2)
    with pytest.raises(ValueError, match="not a readable .npz without pickle"):
        samples_load(b"PK\x03\x04 not a zip", n_classes=2)


def test_exact_and_near_copies_of_a_seed_row_are_found_in_the_seeds_scale():
    seeds = np.array([[0.0, 10.0, 1.0], [100.0, 20.0, 1.0]])  # ranges 100, 10 and a constant column
    generated = np.array(
        [
            [0.0, 10.0, 1.0],  # exact copy
            [100.5, 19.95, 1.0],  # within 1 % of each range: a near copy
            [98.0, 20.0, 1.0],  # 2 points of 100 away in column 0
            [0.0, 10.0, 1.02],  # the constant column counts in its own units: 0.02 > 0.01
        ]
    )
    assert seed_copies(generated, seeds).tolist() == [True, True, False, False]
    assert seed_copies(generated, seeds, tolerance=0.03).tolist() == [True, True, True, True]


def test_seed_copies_are_dropped_and_counted_and_too_many_refuse_publication():
    seeds = np.array([[0.0, 0.0], [1.0, 1.0]])
    generated = np.array([[0.0, 0.0], [0.5, 0.5], [0.25, 0.75], [1.0, 1.0]])
    kept, labels, dropped = drop_seed_copies(generated, np.array([0, 0, 1, 1]), seeds)
    assert (kept.tolist(), labels.tolist(), dropped) == ([[0.5, 0.5], [0.25, 0.75]], [0, 1], 2)
    with pytest.raises(SeedCopiesError, match="^3 of the 4 generated rows copy a seed row"):
        drop_seed_copies(
            np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.5, 0.5]]), np.zeros(4), seeds
        )
