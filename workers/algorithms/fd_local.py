"""A silo's side of federated distillation (Jeong et al. 2018, FD, Algorithm 1, device side): a zoo MLP
trained round by round on the silo's own rows with the distillation regulariser toward the global per-label
logits the exchange returned, and the per-label mean logits it uploads.

Round r (lines 3-9 of Algorithm 1): for ``epochs`` passes over the silo's rows in mini-batches, the loss of a
row (x, ℓ) is ``CE(F(x), ℓ) + β · CE(softmax(F̂_ℓ), softmax(F(x)))`` where F̂_ℓ is the global logit vector of
label ℓ from round r − 1 (no regulariser in round 1, or for a label no other silo held:
:func:`workers.algorithms.fd.distillation_regulariser`). After training, the upload is the mean of F(x) over the
silo's rows of each label (:func:`workers.algorithms.fd.local_label_logits`). The network is a zoo MLP
(:func:`workers.zoo.build_module`) with one output per federation class, so its safetensors file is submittable
like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional

from workers.algorithms.fd import distillation_regulariser, local_label_logits
from workers.zoo import build_module


@dataclass(frozen=True)
class FDLocalSetting:
    """The silo's network (hidden widths), passes over its rows per round, batch size, SGD learning rate and β."""

    hidden_sizes: tuple[int, ...] = (64,)
    epochs: int = 1
    batch_size: int = 64
    learning_rate: float = 0.05
    beta: float = 1.0


class FDLocalModel:
    """One silo's network across the rounds of an exchange.

    Parameters
    ----------
    n_features, n_classes : int
        Width of the federation's encoded features and its number of classes C.
    setting : FDLocalSetting
    seed : int
        Seeds the weight initialisation and the mini-batch order.
    """

    def __init__(self, *, n_features: int, n_classes: int, setting: FDLocalSetting, seed: int):
        self.setting = setting
        self.n_classes = int(n_classes)
        self.spec = {
            "architecture": "mlp",
            "n_features": int(n_features),
            "hidden_sizes": [int(width) for width in setting.hidden_sizes],
            "n_classes": int(n_classes),
        }
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.module = build_module(self.spec)
        self.rng = np.random.default_rng(seed)

    def train_round(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        *,
        global_logits: np.ndarray | None = None,
        available: np.ndarray | None = None,
    ) -> None:
        """One round of local training; ``global_logits`` (C, C) and ``available`` (C,) from the last round."""
        inputs = torch.as_tensor(np.asarray(features, dtype=np.float32))
        targets = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        teacher = (
            None
            if global_logits is None
            else torch.as_tensor(np.asarray(global_logits, dtype=np.float32))
        )
        usable = (
            torch.ones(self.n_classes, dtype=torch.bool)
            if available is None
            else torch.as_tensor(np.asarray(available, dtype=bool))
        )
        optimizer = torch.optim.SGD(self.module.parameters(), lr=self.setting.learning_rate)
        self.module.train()
        for _ in range(self.setting.epochs):
            order = torch.as_tensor(self.rng.permutation(len(targets)))
            for start in range(0, len(order), self.setting.batch_size):
                batch = order[start : start + self.setting.batch_size]
                outputs = self.module(inputs[batch])
                loss = functional.cross_entropy(outputs, targets[batch])
                if teacher is not None:
                    distilled = usable[targets[batch]]
                    if distilled.any():
                        loss = loss + self.setting.beta * distillation_regulariser(
                            outputs[distilled], teacher[targets[batch][distilled]]
                        )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        self.module.eval()

    def label_logits(
        self, features: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The upload: ``(F̄ (C, C), present (C,))``, the mean logits of the silo's rows per label."""
        with torch.no_grad():
            outputs = self.module(torch.as_tensor(np.asarray(features, dtype=np.float32))).numpy()
        return local_label_logits(outputs, labels, self.n_classes)

    def predict(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return (
                self.module(torch.as_tensor(np.asarray(features, dtype=np.float32)))
                .argmax(dim=1)
                .numpy()
            )


__all__ = ["FDLocalModel", "FDLocalSetting"]
