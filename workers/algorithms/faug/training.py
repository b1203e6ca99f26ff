"""Training FAug's conditional GAN on the pooled seeds (Jeong et al. 2018, Section 3), optionally after an
unconditional phase on unlabelled public rows, and optionally with a DP-SGD discriminator.

Beyond the paper (its stated future work), the discriminator may be trained with DP-SGD through Opacus
(Poisson sampling, per-example clipping, Gaussian noise): the generator only ever sees the seeds
through the discriminator's noisy gradients, so it is post-processing of a DP-SGD run and is
(ε, δ)-DP with respect to each seed sample. ε is the market's one DP-SGD accountant
(:func:`workers.privacy.dp_sgd.dp_sgd_privacy_bound`, the market's RDP accountant). Each discriminator step
sees the Poisson batch of real seeds and a fixed number (the expected batch size) of generated rows
in one forward pass, so adding or removing a seed changes one clipped per-example gradient only.

Where the federation allows, the GAN first learns the data's shape from *unlabelled public rows*
(``public_features``): an unconditional phase in which the public rows are "real" and both networks read an
all-zero label vector, then the conditional phase on the seeds as without them. The public phase is ordinary
(non-private) training that ends before the discriminator is handed to Opacus, so the DP-SGD run, and the ε its
accountant gives, are exactly those without it: public rows are public and cost no ε. The conditional phase
starts from the pretrained weights, with fresh optimisers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from workers.algorithms.faug.generator import TrainedGenerator
from workers.algorithms.faug.networks import (
    ARCHITECTURE,
    ConditionalDiscriminator,
    ConditionalGenerator,
    generator_spec,
    validate_spec,
)
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound, noise_multiplier_for

MAX_PUBLIC_ROWS = 100_000


class TrainingCancelled(RuntimeError):
    """The caller's ``stop_requested`` turned true between two steps: the training stopped, nothing is returned."""


@dataclass(frozen=True)
class GanSetting:
    """Sizes and training of the conditional GAN: one generator step per discriminator step, Adam (β₁ = 0.5).

    ``epochs`` are passes of the discriminator over the seeds in batches of (expected, under DP-SGD
    Poisson sampling) ``batch_size``; ``public_epochs`` are passes over the unlabelled public rows before them,
    when there are any."""

    latent_size: int = 32
    generator_hidden_sizes: tuple[int, ...] = (256,)
    discriminator_hidden_sizes: tuple[int, ...] = (256,)
    epochs: int = 100
    batch_size: int = 32
    learning_rate: float = 2e-4
    public_epochs: int = 5


@dataclass(frozen=True)
class GeneratorPrivacy:
    """DP-SGD of the discriminator: exactly one of ``noise_multiplier`` (σ) and ``target_epsilon``, the
    per-example clipping norm and δ."""

    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    max_grad_norm: float = 1.0
    delta: float = 1e-5

    def parameters(self, *, n_examples: int, batch_size: int, epochs: int) -> DpSgdParameters:
        """The DP-SGD run these settings give on ``n_examples`` seeds (σ solved by the market's accountant if needed)."""
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError(
                "A DP generator takes exactly one of noise_multiplier and target_epsilon."
            )
        noise_multiplier = self.noise_multiplier
        if noise_multiplier is None:
            noise_multiplier = noise_multiplier_for(
                target_epsilon=float(
                    self.target_epsilon or 0.0
                ),  # one of the two is set (checked above)
                batch_size=batch_size,
                epochs=epochs,
                n_examples=n_examples,
                delta=self.delta,
            )
        return DpSgdParameters(
            noise_multiplier=float(noise_multiplier),
            max_grad_norm=float(self.max_grad_norm),
            batch_size=batch_size,
            epochs=epochs,
            n_examples=n_examples,
            delta=float(self.delta),
        )


def train_generator(
    features,
    labels,
    *,
    n_classes: int,
    setting: GanSetting = GanSetting(),
    seed: int,
    privacy: GeneratorPrivacy | None = None,
    public_features=None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> TrainedGenerator:
    """Train a conditional GAN on pooled seed samples and return its generator.

    Parameters
    ----------
    features : array of shape (n, n_features)
        Seed samples, values in [0, 1].
    labels : array of shape (n,)
        Their labels in ``0 .. n_classes - 1``.
    n_classes : int
    setting : GanSetting
    seed : int
        Seeds the initialisation, the non-private batches and the generator's latent draws. Under DP-SGD
        the Poisson sampling and the gradient noise are the mechanism and come from the operating system
        (``torch.seed()``), never from ``seed``, as in :mod:`workers.learners.dp_sgd`.
    privacy : GeneratorPrivacy or None
        Train the discriminator with DP-SGD through Opacus.
    public_features : array of shape (m, n_features) or None
        Unlabelled public rows, values in [0, 1], at most ``MAX_PUBLIC_ROWS``: both networks first train
        ``setting.public_epochs`` unconditional epochs on them (no ε: this phase never reads a seed and ends
        before DP-SGD starts).
    stop_requested : callable returning bool
        Asked before every step; when it returns True the training stops with :class:`TrainingCancelled`.

    Returns
    -------
    TrainedGenerator
    """
    features = np.ascontiguousarray(features, dtype=np.float32)
    labels = np.asarray(labels, dtype=np.int64)
    if features.ndim != 2 or len(features) != len(labels) or len(labels) == 0:
        raise ValueError(
            "Seed features must be a non-empty (n, n_features) matrix with one label per row."
        )
    if not np.isfinite(features).all() or features.min() < 0 or features.max() > 1:
        raise ValueError("Seed features must be finite and scaled to [0, 1].")
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"Seed labels must lie in 0 .. {n_classes - 1}.")
    if public_features is not None:
        public_features = _checked_public(public_features, n_features=features.shape[1])
    spec = validate_spec(
        {
            "architecture": ARCHITECTURE,
            "n_features": int(features.shape[1]),
            "n_classes": int(n_classes),
            "latent_size": int(setting.latent_size),
            "hidden_sizes": [int(width) for width in setting.generator_hidden_sizes],
        }
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        generator = ConditionalGenerator(spec)
        discriminator = ConditionalDiscriminator(
            spec["n_features"], n_classes, setting.discriminator_hidden_sizes
        )
        latent_generator = torch.Generator().manual_seed(seed + 1)
        if public_features is not None:
            _pretrain_on_public(
                generator,
                discriminator,
                public_features,
                setting,
                latent_generator,
                seed,
                stop_requested,
            )
        dataset = torch.utils.data.TensorDataset(
            torch.from_numpy(features), torch.from_numpy(labels)
        )
        if privacy is None:
            loader = torch.utils.data.DataLoader(
                dataset,
                batch_size=setting.batch_size,
                shuffle=True,
                generator=torch.Generator().manual_seed(seed + 2),
            )
            _train(
                generator,
                discriminator,
                _adam(discriminator, setting),
                loader,
                setting,
                latent_generator,
                stop_requested=stop_requested,
            )
            return TrainedGenerator(generator, spec)
        return _train_private(
            generator, discriminator, dataset, setting, latent_generator, privacy, stop_requested
        )


def _checked_public(public_features, *, n_features: int) -> np.ndarray:
    public_features = np.ascontiguousarray(public_features, dtype=np.float32)
    if (
        public_features.ndim != 2
        or public_features.shape[1] != n_features
        or not 1 <= len(public_features) <= MAX_PUBLIC_ROWS
    ):
        raise ValueError(
            f"Public features must be a (m, {n_features}) matrix, the seeds' features, "
            f"with 1 to {MAX_PUBLIC_ROWS} rows."
        )
    if (
        not np.isfinite(public_features).all()
        or public_features.min() < 0
        or public_features.max() > 1
    ):
        raise ValueError("Public features must be finite and scaled to [0, 1].")
    return public_features


def _pretrain_on_public(
    generator,
    discriminator,
    public_features: np.ndarray,
    setting: GanSetting,
    latent_generator,
    seed,
    stop_requested: Callable[[], bool],
) -> None:
    """The unconditional phase: public rows are real, every row (real or generated) has no label."""
    if setting.public_epochs < 1:
        return
    unlabelled = torch.full((len(public_features),), generator.n_classes, dtype=torch.int64)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(public_features), unlabelled),
        batch_size=setting.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed + 3),
    )
    _train(
        generator,
        discriminator,
        _adam(discriminator, setting),
        loader,
        setting,
        latent_generator,
        epochs=setting.public_epochs,
        unconditional=True,
        stop_requested=stop_requested,
    )


def _adam(module: nn.Module, setting: GanSetting) -> torch.optim.Optimizer:
    return torch.optim.Adam(module.parameters(), lr=setting.learning_rate, betas=(0.5, 0.999))


def _train_private(
    generator,
    discriminator,
    dataset,
    setting: GanSetting,
    latent_generator,
    privacy: GeneratorPrivacy,
    stop_requested: Callable[[], bool],
) -> TrainedGenerator:
    from opacus import (
        PrivacyEngine,
    )  # imports torch's functorch helpers; only the DP generator needs it

    parameters = privacy.parameters(
        n_examples=len(dataset), batch_size=setting.batch_size, epochs=setting.epochs
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=parameters.batch_size)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        torch.seed()  # the mechanism's sampling and noise: never the caller's seed
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Full backward hook")
        warnings.filterwarnings("ignore", message="Using a non-full backward hook")
        engine = PrivacyEngine(accountant="rdp", secure_mode=False)
        private_discriminator, optimizer, private_loader = engine.make_private(
            module=discriminator,
            optimizer=_adam(discriminator, setting),
            data_loader=loader,
            noise_multiplier=parameters.noise_multiplier,
            max_grad_norm=parameters.max_grad_norm,
            poisson_sampling=True,
        )
        _train(
            generator,
            private_discriminator,
            optimizer,
            private_loader,
            setting,
            latent_generator,
            n_generated=parameters.batch_size,
            stop_requested=stop_requested,
        )
    if engine.accountant.history != [
        (parameters.noise_multiplier, parameters.sample_rate, parameters.steps)
    ]:
        raise RuntimeError(
            f"Opacus ran {engine.accountant.history}, not the declared {parameters}."
        )
    private_discriminator._close()
    report, _ = dp_sgd_privacy_bound(parameters)
    return TrainedGenerator(
        generator, generator_spec(generator), privacy=parameters, privacy_report=report
    )


def _train(
    generator,
    discriminator,
    discriminator_optimizer,
    loader,
    setting: GanSetting,
    latent_generator,
    n_generated: int | None = None,
    epochs: int | None = None,
    unconditional: bool = False,
    stop_requested: Callable[[], bool] = lambda: False,
) -> None:
    """Alternate discriminator and generator steps. The discriminator reads real and generated rows in one
    forward pass (one per-example gradient each under DP-SGD); ``n_generated`` fixes the generated rows per
    step (else as many as the real batch). The generator's step runs with the discriminator's per-example
    hooks off: it reads no seed. ``epochs`` defaults to ``setting.epochs``; ``unconditional`` generates rows
    with no label (the public phase). ``stop_requested`` is asked before every step (:class:`TrainingCancelled`)."""
    generator_optimizer = _adam(generator, setting)
    n_classes, latent_size = generator.n_classes, generator.latent_size
    private = hasattr(discriminator, "disable_hooks")

    def labels_to_generate(count: int) -> torch.Tensor:
        if unconditional:
            return torch.full((count,), n_classes, dtype=torch.int64)
        return torch.randint(n_classes, (count,), generator=latent_generator)

    for _ in range(setting.epochs if epochs is None else epochs):
        for real, real_labels in loader:
            if stop_requested():
                raise TrainingCancelled("The training was cancelled.")
            n_fake = n_generated if n_generated is not None else len(real)
            fake_labels = labels_to_generate(n_fake)
            with torch.no_grad():
                fake = generator(
                    torch.randn(n_fake, latent_size, generator=latent_generator), fake_labels
                )
            discriminator_optimizer.zero_grad(set_to_none=True)
            logits = discriminator(torch.cat([real, fake]), torch.cat([real_labels, fake_labels]))
            targets = torch.cat([torch.ones(len(real)), torch.zeros(n_fake)])
            # the mean over the rows of this one pass: Opacus (loss_reduction "mean") recovers each row's gradient
            functional.binary_cross_entropy_with_logits(logits, targets).backward()
            discriminator_optimizer.step()

            if private:
                discriminator.disable_hooks()
            generator_optimizer.zero_grad(set_to_none=True)
            wanted = labels_to_generate(setting.batch_size)
            generated = generator(
                torch.randn(setting.batch_size, latent_size, generator=latent_generator), wanted
            )
            functional.binary_cross_entropy_with_logits(
                discriminator(generated, wanted), torch.ones(setting.batch_size)
            ).backward()
            generator_optimizer.step()
            discriminator.zero_grad(set_to_none=True)
            if private:
                discriminator.enable_hooks()
