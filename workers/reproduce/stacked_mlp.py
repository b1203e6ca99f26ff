"""Many small MLPs trained side by side as one batched network, for the protocol simulators.

The CPFL (Dhasade et al. 2024) and FD (Jeong et al. 2018) simulators train one model per client
or device. Looping over a hundred clients in Python costs more than the arithmetic, so the
models are stacked: layer ℓ of all m models is one tensor ``(m, in, out)`` and a step is one
batched matrix product (``torch.baddbmm``) over per-model mini-batches. Each model's loss depends
on its own parameters only, so the summed loss gives every model exactly the gradient it would
get alone, and SGD (plain, no momentum) updates each one as if trained separately.

The architecture is the zoo's MLP (:class:`workers.zoo.MLP`: Linear, ReLU, ..., Linear), so a
stacked model can be copied into a zoo module (:meth:`StackedMLP.zoo_state`).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import torch


class StackedMLP:
    """``n_models`` MLPs ``n_features → hidden_sizes → n_classes`` with PyTorch's default init.

    ``seed`` seeds every model's initialisation (models differ; pass ``same_init=True`` to start
    all of them from one initialisation, as FedAvg's clients do).
    """

    def __init__(
        self,
        n_models: int,
        n_features: int,
        hidden_sizes,
        n_classes: int,
        *,
        seed: int,
        same_init: bool = False,
    ):
        generator = torch.Generator().manual_seed(int(seed))
        widths = [n_features, *hidden_sizes, n_classes]
        self.weights, self.biases = [], []
        for width_in, width_out in zip(widths, widths[1:]):
            bound = 1.0 / np.sqrt(width_in)  # nn.Linear's default uniform bounds
            draws = 1 if same_init else n_models
            weight = (torch.rand(draws, width_in, width_out, generator=generator) * 2 - 1) * bound
            bias = (torch.rand(draws, 1, width_out, generator=generator) * 2 - 1) * bound
            self.weights.append(weight.expand(n_models, -1, -1).clone().requires_grad_())
            self.biases.append(bias.expand(n_models, -1, -1).clone().requires_grad_())

    @property
    def parameters(self) -> list[torch.Tensor]:
        return [*self.weights, *self.biases]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits ``(m, batch, C)`` for per-model inputs ``(m, batch, n_features)``."""
        hidden = features
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            hidden = torch.baddbmm(bias, hidden, weight)
            if layer < len(self.weights) - 1:
                hidden = torch.relu(hidden)
        return hidden

    def logits(self, features, models=None, batch_rows: int = 4096) -> np.ndarray:
        """Logits ``(len(models), n, C)`` of the chosen models (all by default) on shared rows."""
        models = np.arange(self.weights[0].shape[0]) if models is None else np.asarray(models)
        features = torch.as_tensor(np.asarray(features, dtype=np.float32))
        outputs = []
        with torch.no_grad():
            for start in range(0, len(features), batch_rows):
                batch = features[start : start + batch_rows]
                hidden = batch.unsqueeze(0).expand(len(models), -1, -1)
                for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
                    hidden = torch.baddbmm(bias[models], hidden, weight[models])
                    if layer < len(self.weights) - 1:
                        hidden = torch.relu(hidden)
                outputs.append(hidden.numpy())
        return np.concatenate(outputs, axis=1).astype(np.float64)

    def sgd_step(self, loss: torch.Tensor, learning_rate: float, active=None) -> None:
        """One SGD step on ``loss`` (a sum of per-model losses); ``active`` (bool per model) masks
        the models that may change."""
        for parameter in self.parameters:
            parameter.grad = None
        loss.backward()
        with torch.no_grad():
            for parameter in self.parameters:
                step = cast(torch.Tensor, parameter.grad) * learning_rate  # backward() just set it
                if active is not None:
                    step = step * torch.as_tensor(active, dtype=step.dtype).view(-1, 1, 1)
                parameter -= step

    def average(self, groups, weights) -> None:
        """FedAvg: inside each group (an int per model), every model becomes the ``weights``-weighted
        mean of the group's models."""
        groups = torch.as_tensor(np.asarray(groups), dtype=torch.long)
        weights = torch.as_tensor(np.asarray(weights, dtype=np.float32))
        n_groups = int(groups.max()) + 1
        totals = torch.zeros(n_groups).index_add_(0, groups, weights)
        with torch.no_grad():
            for parameter in self.parameters:
                weighted = parameter * weights.view(-1, 1, 1)
                sums = torch.zeros((n_groups, *parameter.shape[1:])).index_add_(0, groups, weighted)
                parameter.copy_((sums / totals.view(-1, 1, 1))[groups])

    def snapshot(self) -> list[torch.Tensor]:
        return [parameter.detach().clone() for parameter in self.parameters]

    def restore(self, snapshot, models) -> None:
        """Copy the chosen models' parameters back from a :meth:`snapshot`."""
        models = torch.as_tensor(np.asarray(models), dtype=torch.long)
        with torch.no_grad():
            for parameter, saved in zip(self.parameters, snapshot):
                parameter[models] = saved[models]

    def n_parameters(self) -> int:
        """Numbers in ONE model (what FedAvg sends per client and direction)."""
        return int(sum(parameter[0].numel() for parameter in self.parameters))

    def zoo_state(self, model: int) -> dict[str, torch.Tensor]:
        """Model ``model`` as a :class:`workers.zoo.MLP` state dict (``layers.<2ℓ>.weight/bias``)."""
        state = {}
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            state[f"layers.{2 * layer}.weight"] = weight[model].detach().T.contiguous().clone()
            state[f"layers.{2 * layer}.bias"] = bias[model, 0].detach().clone()
        return state


def client_batches(
    client_indices: list[np.ndarray], batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """``(n_clients, batch_size)`` indices into the shared data: each client's mini-batch, drawn
    uniformly with replacement from its own examples."""
    sizes = np.array([len(indices) for indices in client_indices])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    flat = np.concatenate(client_indices)
    draws = (rng.random((len(client_indices), batch_size)) * sizes[:, None]).astype(np.int64)
    return flat[offsets[:, None] + draws]
