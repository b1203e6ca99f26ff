"""Torch networks from the model zoo behind the scikit-learn classifier contract.

The estimator stores hyperparameters only; ``fit`` builds ``workers.zoo.build_module(spec_)``,
trains it with mini-batch Adam or SGD on the best available device (CUDA where present, else the
CPU) and keeps the trained module on the CPU as ``module_`` with its zoo spec as ``spec_``, so the
market can export the weights as a safetensors state dict next to the JSON spec.

Randomness: ``random_state`` seeds the weight initialisation (inside ``torch.random.fork_rng``,
so the caller's global torch generator is untouched) and the mini-batch shuffles (a numpy
generator). The same seed on the same device gives the same network.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y
from torch import nn

from workers.zoo import build_module

PREDICT_BATCH_SIZE = 4096


def best_device() -> str:
    """``"cuda"`` where a CUDA device is present, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchClassifier(ClassifierMixin, BaseEstimator):
    """A zoo network (``architecture`` "mlp" or "cnn") trained with cross-entropy.

    Parameters
    ----------
    architecture : {"mlp", "cnn"}
    hidden_sizes : sequence of int
        Widths of the fully connected hidden layers.
    image_shape, conv_channels, kernel_size :
        CNN only: ``[channels, height, width]`` of the flat input, the channels of each 5x5
        (``kernel_size``) convolution + 2x2 max-pool block.
    epochs, batch_size, learning_rate, optimizer, weight_decay :
        Mini-batch training; ``optimizer`` is "adam" or "sgd" (SGD with momentum 0.9).
    device : {"auto", "cpu", "cuda"}
        "auto" picks CUDA where present.
    random_state : int or None
        Seeds weight initialisation and shuffles.
    """

    def __init__(
        self,
        architecture="mlp",
        hidden_sizes=(100, 100),
        image_shape=None,
        conv_channels=(6, 16),
        kernel_size=5,
        epochs=20,
        batch_size=64,
        learning_rate=1e-3,
        optimizer="adam",
        weight_decay=0.0,
        device="auto",
        random_state=None,
    ):
        self.architecture = architecture
        self.hidden_sizes = hidden_sizes
        self.image_shape = image_shape
        self.conv_channels = conv_channels
        self.kernel_size = kernel_size
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.weight_decay = weight_decay
        self.device = device
        self.random_state = random_state

    def fit(self, X, y):
        X, y = check_X_y(X, y, dtype=np.float32)
        self.classes_, encoded_labels = np.unique(y, return_inverse=True)
        self.n_features_in_ = X.shape[1]
        self.spec_ = self._spec(X.shape[1], len(self.classes_))
        seed = 0 if self.random_state is None else int(self.random_state)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(self.spec_)
        device = torch.device(best_device() if self.device == "auto" else self.device)
        module.to(device)
        self._train(module, X, encoded_labels, device, np.random.default_rng(seed))
        self.module_ = module.to("cpu").eval()
        return self

    def _spec(self, n_features: int, n_classes: int) -> dict:
        hidden_sizes = [int(width) for width in self.hidden_sizes]
        if self.architecture == "cnn":
            return {
                "architecture": "cnn",
                "image_shape": [int(v) for v in self.image_shape],
                "conv_channels": [int(c) for c in self.conv_channels],
                "kernel_size": int(self.kernel_size),
                "hidden_sizes": hidden_sizes,
                "n_classes": n_classes,
            }
        return {
            "architecture": "mlp",
            "n_features": n_features,
            "hidden_sizes": hidden_sizes,
            "n_classes": n_classes,
        }

    def _train(
        self, module: nn.Module, X: np.ndarray, y: np.ndarray, device, rng: np.random.Generator
    ) -> None:
        features = torch.from_numpy(X).to(device)
        labels = torch.from_numpy(y.astype(np.int64)).to(device)
        optimizer = self._optimizer(module)
        loss_function = nn.CrossEntropyLoss()
        module.train()
        for _ in range(self.epochs):
            order = torch.from_numpy(rng.permutation(len(X))).to(device)
            for start in range(0, len(X), self.batch_size):
                batch = order[start : start + self.batch_size]
                optimizer.zero_grad(set_to_none=True)
                loss_function(module(features[batch]), labels[batch]).backward()
                optimizer.step()

    def _optimizer(self, module: nn.Module) -> torch.optim.Optimizer:
        if self.optimizer == "adam":
            return torch.optim.Adam(
                module.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay
            )
        if self.optimizer == "sgd":
            return torch.optim.SGD(
                module.parameters(),
                lr=self.learning_rate,
                momentum=0.9,
                weight_decay=self.weight_decay,
            )
        raise ValueError(f"Unknown optimizer {self.optimizer!r}; use 'adam' or 'sgd'.")

    def predict_proba(self, X) -> np.ndarray:
        """Softmax class probabilities, shape ``(n_examples, len(classes_))``, computed in batches."""
        check_is_fitted(self, "module_")
        X = check_array(X, dtype=np.float32)
        device = torch.device(best_device() if self.device == "auto" else self.device)
        module = self.module_.to(device)
        outputs = []
        with torch.no_grad():
            for start in range(0, len(X), PREDICT_BATCH_SIZE):
                batch = torch.from_numpy(X[start : start + PREDICT_BATCH_SIZE]).to(device)
                outputs.append(torch.softmax(module(batch), dim=1).cpu().numpy())
        self.module_ = module.to("cpu")
        return (
            np.concatenate(outputs).astype(np.float64)
            if outputs
            else np.empty((0, len(self.classes_)))
        )

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
