"""The FAug reproduction chooses ``public_epochs`` without reading the test split (docs/results/faug.md)."""

import numpy as np

from workers.datasets import Dataset
from workers.reproduce.faug import VALIDATION_FRACTION, choose_public_epochs, validation_split


def test_the_validation_split_cuts_the_training_rows_alone_and_drops_the_test_rows():
    train_y = np.repeat(np.arange(3), 30)
    data = Dataset(
        name="toy",
        train_x=np.arange(len(train_y), dtype=np.float32)[:, None],  # row i holds i
        train_y=train_y,
        public_x=np.zeros((4, 1), dtype=np.float32),
        public_y=np.zeros(4, dtype=np.int64),
        test_x=np.full((8, 1), -1.0, dtype=np.float32),  # test rows hold -1
        test_y=np.zeros(8, dtype=np.int64),
        class_names=("a", "b", "c"),
    )
    split = validation_split(data, seed=0)
    train_rows, validation_rows = split.train_x[:, 0].astype(int), split.test_x[:, 0].astype(int)
    assert (split.test_x >= 0).all()  # no test row left anywhere
    assert sorted(np.concatenate([train_rows, validation_rows])) == list(range(len(train_y)))
    assert len(validation_rows) == round(VALIDATION_FRACTION * len(train_y))
    assert np.array_equal(split.train_y, train_y[train_rows])
    assert np.array_equal(split.test_y, train_y[validation_rows])
    assert np.bincount(split.test_y).tolist() == [len(validation_rows) // 3] * 3  # stratified


def test_the_choice_is_the_best_mean_and_ties_go_to_fewer_epochs():
    assert choose_public_epochs({0: [0.70, 0.72], 5: [0.74, 0.70], 20: [0.60, 0.90]}) == 20
    assert choose_public_epochs({20: [0.5, 0.75], 5: [0.25, 1.0], 0: [0.5, 0.5]}) == 5
