import numpy as np
import pytest
import torch

from workers.reproduce.stacked_mlp import StackedMLP, client_batches
from workers.zoo import build_module


def test_a_stacked_model_is_the_zoo_mlp_with_the_same_weights():
    stacked = StackedMLP(3, 5, [4], 2, seed=0)
    module = build_module(
        {"architecture": "mlp", "n_features": 5, "hidden_sizes": [4], "n_classes": 2}
    )
    module.load_state_dict(stacked.zoo_state(1))
    rows = np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(rows)).numpy()
    assert stacked.logits(rows, [1])[0] == pytest.approx(expected, abs=1e-6)
    assert stacked.n_parameters() == 5 * 4 + 4 + 4 * 2 + 2


def test_training_side_by_side_equals_training_alone():
    rows = torch.as_tensor(np.random.default_rng(1).normal(size=(2, 8, 5)), dtype=torch.float32)
    labels = torch.tensor([[0, 1] * 4, [1, 1, 0, 0] * 2])
    both = StackedMLP(2, 5, [4], 2, seed=3)
    alone = StackedMLP(2, 5, [4], 2, seed=3)
    loss = torch.nn.functional.cross_entropy(
        both.forward(rows).reshape(-1, 2), labels.reshape(-1), reduction="sum"
    )
    both.sgd_step(loss, 0.1)
    only_first = torch.nn.functional.cross_entropy(
        alone.forward(rows)[0], labels[0], reduction="sum"
    )
    alone.sgd_step(only_first, 0.1, active=[True, False])
    assert torch.allclose(both.weights[0][0], alone.weights[0][0])
    assert not torch.allclose(
        both.weights[0][1], alone.weights[0][1]
    )  # model 1 was masked in `alone`


def test_average_is_the_weighted_mean_inside_each_group():
    stacked = StackedMLP(3, 2, [2], 2, seed=0)
    before = [p.detach().clone() for p in stacked.parameters]
    stacked.average([0, 0, 1], [1.0, 3.0, 5.0])
    for old, new in zip(before, stacked.parameters):
        mean = (old[0] * 1 + old[1] * 3) / 4
        assert (
            torch.allclose(new[0], mean)
            and torch.allclose(new[1], mean)
            and torch.allclose(new[2], old[2])
        )


def test_client_batches_draw_only_each_clients_rows():
    clients = [np.array([10, 11]), np.array([20, 21, 22])]
    batches = client_batches(clients, 50, np.random.default_rng(0))
    assert set(batches[0]) == {10, 11} and set(batches[1]) == {20, 21, 22}
