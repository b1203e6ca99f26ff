"""Zoo networks trained with DP-SGD through Opacus: example-level (ε, δ)-DP models a silo can submit at L2.

Abadi et al. 2016, *Deep Learning with Differential Privacy*, Algorithm 1, as Opacus implements it
(``PrivacyEngine.make_private``): Poisson sampling of each example with probability
q = 1/⌈n/B⌉, per-example gradients clipped to L2 norm ``max_grad_norm``, Gaussian noise of
standard deviation ``noise_multiplier · max_grad_norm`` on their sum. The guarantee is accounted by
:mod:`workers.privacy.dp_sgd` (the market's RDP accountant), the same function the market runs on the
declared parameters.

Randomness: ``random_state`` seeds the weight initialisation only. The Poisson sampling and the
noise are part of the mechanism and are drawn from torch's generator reseeded from the operating
system (``torch.seed()``) inside ``fork_rng``; they are never seeded by the caller. Opacus'
``secure_mode`` needs ``torchcsprng``, which has no distribution for this torch, so the noise comes
from torch's Mersenne Twister rather than a cryptographically secure generator (docs/dp-sgd.md).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

from workers.learners.torch_classifier import TorchClassifier
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound, noise_multiplier_for


class DpSgdClassifier(TorchClassifier):
    """A :class:`TorchClassifier` trained with DP-SGD.

    Parameters
    ----------
    noise_multiplier : float or None
        σ; give it or ``target_epsilon``.
    target_epsilon : float or None
        Solve σ for this ε with the market's RDP accountant (``noise_multiplier`` must then be None).
    max_grad_norm : float
        Per-example clipping norm C.
    delta : float
        δ of the guarantee.
    batch_size : int
        Expected Poisson batch size B.
    Others as :class:`TorchClassifier` (``optimizer`` "sgd" or "adam").

    Attributes
    ----------
    privacy_ : DpSgdParameters
        What to declare (``n_examples`` is the fit data's row count).
    privacy_report_ : PrivacyReport
        Its example-level (ε, δ).
    """

    def __init__(
        self,
        architecture="mlp",
        hidden_sizes=(100, 100),
        image_shape=None,
        conv_channels=(6, 16),
        kernel_size=5,
        epochs=5,
        batch_size=256,
        learning_rate=0.05,
        optimizer="sgd",
        weight_decay=0.0,
        device="cpu",
        random_state=None,
        noise_multiplier=None,
        target_epsilon=None,
        max_grad_norm=1.0,
        delta=1e-5,
    ):
        super().__init__(
            architecture=architecture,
            hidden_sizes=hidden_sizes,
            image_shape=image_shape,
            conv_channels=conv_channels,
            kernel_size=kernel_size,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            optimizer=optimizer,
            weight_decay=weight_decay,
            device=device,
            random_state=random_state,
        )
        self.noise_multiplier = noise_multiplier
        self.target_epsilon = target_epsilon
        self.max_grad_norm = max_grad_norm
        self.delta = delta

    def _privacy(self, n_examples: int) -> DpSgdParameters:
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError("DP-SGD takes exactly one of noise_multiplier and target_epsilon.")
        noise_multiplier = self.noise_multiplier
        if noise_multiplier is None:
            noise_multiplier = noise_multiplier_for(
                target_epsilon=self.target_epsilon,
                batch_size=int(self.batch_size),
                epochs=int(self.epochs),
                n_examples=n_examples,
                delta=self.delta,
            )
        return DpSgdParameters(
            noise_multiplier=float(noise_multiplier),
            max_grad_norm=float(self.max_grad_norm),
            batch_size=int(self.batch_size),
            epochs=int(self.epochs),
            n_examples=n_examples,
            delta=float(self.delta),
        )

    def _train(
        self, module: nn.Module, X: np.ndarray, y: np.ndarray, device, rng: np.random.Generator
    ) -> None:
        from opacus import (
            PrivacyEngine,  # imports torch's functorch helpers; only DP training needs it
        )

        privacy = self._privacy(len(X))
        dataset = torch.utils.data.TensorDataset(
            torch.from_numpy(X), torch.from_numpy(y.astype(np.int64))
        )
        loader = torch.utils.data.DataLoader(dataset, batch_size=privacy.batch_size)
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            torch.seed()  # the mechanism's sampling and noise: never the caller's seed
            warnings.filterwarnings(
                "ignore", message="Secure RNG turned off"
            )  # said in the module docstring
            warnings.filterwarnings("ignore", message="Full backward hook")
            engine = PrivacyEngine(accountant="rdp", secure_mode=False)
            private_module, optimizer, private_loader = engine.make_private(
                module=module,
                optimizer=self._optimizer(module),
                data_loader=loader,
                noise_multiplier=privacy.noise_multiplier,
                max_grad_norm=privacy.max_grad_norm,
                poisson_sampling=True,
            )
            self._descend(private_module, optimizer, private_loader, device)
        if engine.accountant.history != [
            (privacy.noise_multiplier, privacy.sample_rate, privacy.steps)
        ]:
            raise RuntimeError(
                f"Opacus ran {engine.accountant.history}, not the declared {privacy}."
            )
        self.privacy_ = privacy
        self.privacy_report_, _ = dp_sgd_privacy_bound(privacy)
        private_module._close()  # removes Opacus' hooks and per-example gradients from ``module``

    def _descend(self, module: nn.Module, optimizer, loader, device) -> None:
        loss_function = nn.CrossEntropyLoss()
        module.train()
        for _ in range(self.epochs):
            for features, labels in loader:
                optimizer.zero_grad(set_to_none=True)
                if len(labels):  # a Poisson batch may be empty; Opacus still takes the noisy step
                    loss_function(module(features.to(device)), labels.to(device)).backward()
                optimizer.step()


__all__ = ["DpSgdClassifier"]
