"""The tabular FAug reproduction's non-IID devices (docs/results/faug.md, workers/reproduce/faug_tabular.py)."""

import numpy as np

from workers.reproduce.faug_tabular import KEEP, N_DEVICES, N_TRAIN, adult_numbers, starved_devices


def test_each_device_keeps_five_rows_of_its_target_label_and_seeds_them_with_five_others():
    features, labels, test_features, test_labels = adult_numbers(0)
    assert features.shape == (N_TRAIN, 8) and len(test_labels) == len(test_features) == 2000
    assert set(np.unique(features[:, 5])) == {0.0, 1.0}  # gender, a code
    devices = starved_devices(labels, np.random.default_rng(0))
    assert len(devices) == N_DEVICES
    kept_rows = np.concatenate([kept for kept, _, _ in devices])
    assert len(np.unique(kept_rows)) == len(kept_rows)  # no row on two devices
    for device, (kept, target, seeds) in enumerate(devices):
        assert target == (1 if device < N_DEVICES // 2 else 0)
        assert (labels[kept] == target).sum() == KEEP
        assert labels[seeds].tolist() == [target] * KEEP + [1 - target] * KEEP
        assert set(seeds) <= set(kept)
