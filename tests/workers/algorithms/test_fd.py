import numpy as np
import pytest
from sklearn.datasets import load_digits

from workers.algorithms.fd import (
    fd_round_bits,
    fd_server_aggregate,
    fedavg_round_bits,
    local_label_logits,
)
from workers.reproduce.fd_simulation import FDSetting, simulate, starved_partition


def test_local_label_logits_average_per_label_and_mark_missing_labels():
    logits = np.array([[1.0, 0.0, 0.0], [3.0, 2.0, 0.0], [0.0, 5.0, 1.0]])
    averages, present = local_label_logits(logits, [0, 0, 1], 3)
    assert averages.tolist() == [[2.0, 1.0, 0.0], [0.0, 5.0, 1.0], [0.0, 0.0, 0.0]]
    assert present.tolist() == [True, True, False]


def test_server_returns_to_each_silo_the_average_of_the_others():
    # 3 silos, 2 labels, 2 logits; silo 2 holds no example of label 1
    local = np.array([[[1.0, 0.0], [0.0, 4.0]], [[3.0, 2.0], [2.0, 6.0]], [[5.0, 4.0], [9.0, 9.0]]])
    present = np.array([[True, True], [True, True], [True, False]])
    averages, available = fd_server_aggregate(local, present)
    assert averages[0].tolist() == [[4.0, 3.0], [2.0, 6.0]]  # label 1: only silo 1 (silo 2 absent)
    assert averages[1].tolist() == [[3.0, 2.0], [0.0, 4.0]]
    assert averages[2].tolist() == [[2.0, 1.0], [1.0, 5.0]]
    assert available.all()


def test_a_label_only_one_silo_holds_has_no_global_vector_for_that_silo():
    local = np.ones((2, 2, 2))
    averages, available = fd_server_aggregate(local, np.array([[True, True], [True, False]]))
    assert available.tolist() == [[True, False], [True, True]]
    assert averages[0, 1].tolist() == [0.0, 0.0]


def test_an_average_of_fewer_than_min_contributors_other_silos_is_withheld():
    # the same 3 silos as above: silo 0's and silo 1's label-1 averages are one silo's upload each
    local = np.array([[[1.0, 0.0], [0.0, 4.0]], [[3.0, 2.0], [2.0, 6.0]], [[5.0, 4.0], [9.0, 9.0]]])
    present = np.array([[True, True], [True, True], [True, False]])
    averages, available = fd_server_aggregate(local, present, min_contributors=2)
    assert available.tolist() == [[True, False], [True, False], [True, True]]
    assert averages[0].tolist() == [[4.0, 3.0], [0.0, 0.0]]
    assert averages[1].tolist() == [[3.0, 2.0], [0.0, 0.0]]
    assert averages[2].tolist() == [[2.0, 1.0], [1.0, 5.0]]
    with pytest.raises(ValueError, match="at least 1 contributor, not 0"):
        fd_server_aggregate(local, present, min_contributors=0)


def test_communication_bits():
    assert fd_round_bits(4, 10) == 2 * 4 * 100 * 32
    assert fedavg_round_bits(4, 1000) == 2 * 4 * 1000 * 32


def test_starved_partition_keeps_few_examples_of_target_labels():
    labels = np.repeat(np.arange(10), 100)
    devices = starved_partition(labels, 4, n_starved=2, keep=5, seed=0)
    for device in devices:
        counts = np.bincount(labels[device], minlength=10)
        assert (counts == 5).sum() >= 2 and (counts >= 5).all()
    assert len(set(np.concatenate(devices))) == sum(len(d) for d in devices)


@pytest.mark.parametrize("protocol", ["fd", "fedavg"])
def test_simulator_learns_and_counts_bits(protocol):
    features, labels = load_digits(return_X_y=True)
    features = (features / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(labels))
    train, test = order[:1400], order[1400:]
    devices = [train[d] for d in starved_partition(labels[train], 3, n_starved=2, keep=5, seed=0)]
    setting = FDSetting(hidden_sizes=(32,), rounds=4, local_steps=30, learning_rate=0.1)
    result = simulate(
        protocol,
        features,
        labels,
        devices,
        features[test],
        labels[test],
        n_classes=10,
        setting=setting,
        seed=0,
    )
    per_round = (
        fd_round_bits(3, 10)
        if protocol == "fd"
        else fedavg_round_bits(3, 64 * 32 + 32 + 32 * 10 + 10)
    )
    assert result["bits"] == 4 * per_round and [p["bits"] for p in result["curve"]] == [
        per_round * r for r in range(1, 5)
    ]
    assert result["accuracy"] > 0.6 and len(result["device_accuracies"]) == 3


def test_local_protocol_exchanges_nothing():
    features, labels = load_digits(return_X_y=True)
    features = (features / 16.0).astype(np.float32)
    devices = starved_partition(labels[:600], 2, n_starved=1, keep=5, seed=0)
    result = simulate(
        "local",
        features,
        labels,
        devices,
        features[600:700],
        labels[600:700],
        n_classes=10,
        setting=FDSetting(hidden_sizes=(16,), rounds=2, local_steps=5),
        seed=0,
    )
    assert result["bits"] == 0 and len(result["curve"]) == 2
