"""Federated augmentation (FAug, Jeong et al. 2018, *Communication-Efficient On-Device Machine Learning:
Federated Distillation and Augmentation under Non-IID Private Data*, Section 3): a conditional generator,
trained on seed samples pooled from the silos, that fills in the labels a silo lacks.

Each silo uploads a few *seed* samples of its target labels (the labels it lacks or nearly lacks) and,
to hide which labels those are, *redundant* samples of other labels; the paper's device–server privacy
leakage is |target| / (|target| + |redundant|) (:func:`device_server_leakage`); what the other silos learn
from the published generator is diluted by every silo's seeds (:func:`inter_device_leakage`). The server trains a
conditional GAN (Mirza and Osindero 2014) on the pooled seeds and publishes the generator; every silo
generates samples of its target labels and trains on its own data plus those samples.

Beyond the paper (its stated future work), the discriminator may be trained with DP-SGD through Opacus
(Poisson sampling, per-example clipping, Gaussian noise): the generator only ever sees the seeds
through the discriminator's noisy gradients, so it is post-processing of a DP-SGD run and is
(ε, δ)-DP with respect to each seed sample. ε is the market's one DP-SGD accountant
(:func:`workers.privacy.dp_sgd.dp_sgd_privacy_bound`, the market's RDP accountant). Each discriminator step
sees the Poisson batch of real seeds and a fixed number (the expected batch size) of generated rows
in one forward pass, so adding or removing a seed changes one clipped per-example gradient only.

The generator travels as safetensors (its state dict, float32) with a zoo-style JSON spec in the metadata
(``{"architecture": "conditional_generator", "n_features", "n_classes", "latent_size", "hidden_sizes"}``),
never a pickle; :func:`load_generator` validates the spec and every tensor's name and shape before
loading.

Where the federation allows, the GAN first learns the data's shape from *unlabelled public rows*
(``public_features``): an unconditional phase in which the public rows are "real" and both networks read an
all-zero label vector, then the conditional phase on the seeds as without them. The public phase is ordinary
(non-private) training that ends before the discriminator is handed to Opacus, so the DP-SGD run, and the ε its
accountant gives, are exactly those without it: public rows are public and cost no ε. The conditional phase
starts from the pretrained weights, with fresh optimisers.

Networks are MLPs over flat features scaled to [0, 1] (MNIST's 784 pixels), small enough to train in
minutes on a CPU.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound, noise_multiplier_for
from workers.privacy.reports import PrivacyReport

ARCHITECTURE = "conditional_generator"
SPEC_KEYS = ("architecture", "n_features", "n_classes", "latent_size", "hidden_sizes")
MAX_FEATURES = 100_000
MAX_CLASSES = 1_000
MAX_LATENT_SIZE = 1_024
MAX_WIDTH = 4_096
MAX_LAYERS = 4
MAX_PARAMETERS = 20_000_000
MAX_GENERATED = 1_000_000
MAX_PUBLIC_ROWS = 100_000
#: Row-passes (the unit of a job's work, :func:`workers.algorithms.schema.learner_work`) one training step costs
#: whatever its batch: torch's fixed cost of a step, a few milliseconds of one core (measured on a CPU worker:
#: 2 ms per MLP GAN step, 10–30 ms per CTGAN step at batch sizes 1 and 2).
STEP_WORK = 20_000
#: Plain row-passes that one row of a DP-SGD step costs: Opacus materialises a per-example gradient of every
#: weight (measured: 30 to 70 times a plain pass).
DP_SGD_ROW_FACTOR = 50
#: Columns a CTGAN makes of one continuous feature: a one-hot mode of its Gaussian mixture (at most 10) and a
#: scalar (Xu et al. 2019, Section 4.2).
TABULAR_COLUMNS_PER_FEATURE = 11


class TrainingCancelled(RuntimeError):
    """The caller's ``stop_requested`` turned true between two steps: the training stopped, nothing is returned."""


def generator_training_work(
    *,
    n_seeds: int,
    n_features: int,
    n_classes: int,
    epochs: int,
    batch_size: int,
    private: bool = False,
    tabular: bool = False,
    n_public: int = 0,
    public_epochs: int = 5,
) -> float:
    """A coarse count of the row-passes a generator's training costs, in the unit of a job's work.

    Every step costs :data:`STEP_WORK` plus, for each of its ``batch_size`` rows, three passes (the
    discriminator reads a real and a generated row, the generator's step one more) through networks whose width
    is (input columns + classes + 256 hidden units) / 10, times :data:`DP_SGD_ROW_FACTOR` under DP-SGD. A CTGAN
    (``tabular``) widens each feature into :data:`TABULAR_COLUMNS_PER_FEATURE` columns. The unconditional phase
    on ``n_public`` public rows (``public_epochs``) is plain training. Measured against a CPU worker it is within
    a factor of about 3; it bounds a training's work, it does not predict its time.

    Parameters
    ----------
    n_seeds : int
        Pooled seed rows; an epoch is ``ceil(n_seeds / batch_size)`` steps.
    n_features, n_classes, epochs, batch_size : int
    private : bool
        Whether the discriminator is trained with DP-SGD.
    tabular : bool
        A CTGAN rather than the MLP GAN.
    n_public, public_epochs : int
        Unlabelled public rows pretrained on first, and the passes over them.

    Returns
    -------
    float
        Row-passes.
    """
    columns = n_features * (TABULAR_COLUMNS_PER_FEATURE if tabular else 1)
    plain_row_work = 3 * (columns + n_classes + 256) / 10

    def phase(rows: int, passes: int, row_work: float) -> float:
        return passes * math.ceil(rows / batch_size) * (STEP_WORK + batch_size * row_work)

    seeds_work = phase(n_seeds, epochs, plain_row_work * (DP_SGD_ROW_FACTOR if private else 1))
    return seeds_work + (phase(n_public, public_epochs, plain_row_work) if n_public else 0.0)


def device_server_leakage(n_target: int, n_redundant: int) -> float:
    """The paper's device–server privacy leakage of one silo's seed upload: |target| / (|target| + |redundant|).

    Parameters
    ----------
    n_target : int
        Seed samples of the silo's target labels (what it wants generated), at least 1.
    n_redundant : int
        Samples of other labels uploaded alongside, to hide which labels are targets.

    Returns
    -------
    float in (0, 1]
        1 when only target samples are uploaded (the server learns exactly which labels the silo lacks).
    """
    for name, value, minimum in (("n_target", n_target, 1), ("n_redundant", n_redundant, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"'{name}' must be an integer of at least {minimum}, not {value!r}.")
    return int(n_target) / (int(n_target) + int(n_redundant))


def inter_device_leakage(n_target: int, n_pooled: int) -> float:
    """What another silo learns of one silo's target labels from the published generator: the silo's target seeds
    as a share of every seed the generator was trained on, |target| / Σ over silos (|target| + |redundant|).

    Every member downloads the generator, and the generator can show which labels were among the pooled seeds, not
    who uploaded them. A silo that guesses another's target labels from it, picking one pooled seed at random,
    names one of that silo's targets with this probability. With one silo it equals
    :func:`device_server_leakage`; with N silos uploading alike it is that divided by N. The paper (Section 3)
    defines an inter-device leakage besides the device–server one; its exact formula could not be consulted
    offline, so this is the market's definition, built the same way as the device–server fraction.

    Parameters
    ----------
    n_target : int
        Seed samples of the silo's target labels, at least 1.
    n_pooled : int
        Seed samples of every silo pooled for the generator (this silo's included), at least ``n_target``.

    Returns
    -------
    float in (0, 1]
    """
    for name, value, minimum in (("n_target", n_target, 1), ("n_pooled", n_pooled, n_target)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"'{name}' must be an integer of at least {minimum}, not {value!r}.")
    return int(n_target) / int(n_pooled)


def _condition(labels: torch.Tensor, n_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """One-hot labels; the label ``n_classes`` (an unlabelled public row) is the all-zero vector."""
    return functional.one_hot(labels, n_classes + 1)[:, :n_classes].to(dtype)


def validate_spec(spec: dict) -> dict:
    """The generator spec, checked (names, integer ranges, parameter count); ValueError naming what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError("The generator spec must be a JSON object.")
    if sorted(spec) != sorted(SPEC_KEYS):
        raise ValueError(
            f"The generator spec has exactly the keys {', '.join(SPEC_KEYS)}, not {sorted(spec)}."
        )
    if spec["architecture"] != ARCHITECTURE:
        raise ValueError(
            f"The generator spec's 'architecture' must be {ARCHITECTURE!r}, not {spec['architecture']!r}."
        )
    for key, maximum in (
        ("n_features", MAX_FEATURES),
        ("n_classes", MAX_CLASSES),
        ("latent_size", MAX_LATENT_SIZE),
    ):
        _check_integer(spec[key], key, 1, maximum)
    hidden_sizes = spec["hidden_sizes"]
    if not isinstance(hidden_sizes, list) or not 1 <= len(hidden_sizes) <= MAX_LAYERS:
        raise ValueError(
            f"The generator spec's 'hidden_sizes' must be a list of 1 to {MAX_LAYERS} integers."
        )
    for width in hidden_sizes:
        _check_integer(width, "hidden_sizes", 1, MAX_WIDTH)
    widths = [spec["latent_size"] + spec["n_classes"], *hidden_sizes, spec["n_features"]]
    n_parameters = sum(
        width_in * width_out + width_out for width_in, width_out in zip(widths, widths[1:])
    )
    if n_parameters > MAX_PARAMETERS:
        raise ValueError(
            f"The generator spec describes {n_parameters} parameters; the limit is {MAX_PARAMETERS}."
        )
    return spec


def _check_integer(value, name: str, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValueError(
            f"The generator spec's '{name}' must be an integer between {minimum} and {maximum}, "
            f"not {value!r}."
        )


class ConditionalGenerator(nn.Module):
    """G(z, y): latent noise and a one-hot label (all zeros for ``y = n_classes``: no label) through an MLP (ReLU)
    to features in [0, 1] (sigmoid)."""

    def __init__(self, spec: dict):
        super().__init__()
        spec = validate_spec(spec)
        self.n_classes = spec["n_classes"]
        self.latent_size = spec["latent_size"]
        widths = [self.latent_size + self.n_classes, *spec["hidden_sizes"]]
        layers: list[nn.Module] = []
        for width_in, width_out in zip(widths, widths[1:]):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], spec["n_features"]))
        self.layers = nn.Sequential(*layers)

    def forward(self, latent: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        condition = _condition(labels, self.n_classes, latent.dtype)
        return torch.sigmoid(self.layers(torch.cat([latent, condition], dim=1)))


class ConditionalDiscriminator(nn.Module):
    """D(x, y): features and a one-hot label (all zeros for ``y = n_classes``: no label) through an MLP
    (LeakyReLU 0.2) to one real-vs-generated logit.

    Only layers Opacus computes per-example gradients for (Linear, activations): no batch normalisation."""

    def __init__(self, n_features: int, n_classes: int, hidden_sizes: tuple[int, ...]):
        super().__init__()
        self.n_classes = n_classes
        widths = [n_features + n_classes, *hidden_sizes]
        layers: list[nn.Module] = []
        for width_in, width_out in zip(widths, widths[1:]):
            layers += [nn.Linear(width_in, width_out), nn.LeakyReLU(0.2)]
        layers.append(nn.Linear(widths[-1], 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        condition = _condition(labels, self.n_classes, features.dtype)
        return self.layers(torch.cat([features, condition], dim=1)).squeeze(1)


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


@dataclass
class TrainedGenerator:
    """A conditional generator, its spec and, when its discriminator was trained with DP-SGD, what to
    declare (``privacy``) and the (ε, δ) it gives with respect to each seed (``privacy_report``)."""

    module: ConditionalGenerator
    spec: dict
    privacy: DpSgdParameters | None = None
    privacy_report: PrivacyReport | None = None

    def generate(self, labels, count: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` generated samples of each label in ``labels``.

        Returns
        -------
        (numpy.ndarray of float32, numpy.ndarray of int64)
            Features of shape (len(labels) · count, n_features) in [0, 1], and their labels
            (each label's ``count`` rows together, in the order given).
        """
        labels = np.asarray(labels)
        n_classes = self.spec["n_classes"]
        if (
            labels.ndim != 1
            or not np.issubdtype(labels.dtype, np.integer)
            or not ((labels >= 0) & (labels < n_classes)).all()
        ):
            raise ValueError(
                f"Labels to generate must be a list of integers in 0 .. {n_classes - 1}."
            )
        _check_integer(count, "count", 0, MAX_GENERATED)
        if len(labels) * count > MAX_GENERATED:
            raise ValueError(
                f"At most {MAX_GENERATED} samples are generated at once, not {len(labels) * count}."
            )
        wanted = torch.from_numpy(np.repeat(labels.astype(np.int64), count))
        generator = torch.Generator().manual_seed(seed)
        latent = torch.randn(len(wanted), self.spec["latent_size"], generator=generator)
        self.module.eval()
        with torch.no_grad():
            features = self.module(latent, wanted)
        return features.numpy().astype(np.float32), wanted.numpy()


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


def generator_spec(generator: ConditionalGenerator) -> dict:
    """The spec of a built generator (read back from its layers)."""
    linear = [layer for layer in generator.layers if isinstance(layer, nn.Linear)]
    return {
        "architecture": ARCHITECTURE,
        "n_features": linear[-1].out_features,
        "n_classes": generator.n_classes,
        "latent_size": generator.latent_size,
        "hidden_sizes": [layer.out_features for layer in linear[:-1]],
    }


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


def save_generator(trained: TrainedGenerator) -> bytes:
    """Safetensors bytes of the generator's float32 state dict, its spec (and any DP-SGD declaration with
    its ε) in the metadata."""
    from safetensors.torch import save

    state = {
        name: tensor.detach().to("cpu").float().contiguous()
        for name, tensor in trained.module.state_dict().items()
    }
    metadata = {"spec": json.dumps(trained.spec)}
    if trained.privacy is not None:
        metadata["privacy_parameters"] = json.dumps(trained.privacy.as_declaration())
        metadata["n_seed_examples"] = str(trained.privacy.n_examples)
    return save(state, metadata=metadata)


def load_generator(data: bytes, *, max_bytes: int = 200_000_000) -> TrainedGenerator:
    """The generator in safetensors bytes, spec and tensors validated first; ValueError with a sentence.

    A DP-SGD declaration in the metadata is re-accounted with the market's accountant, never trusted."""
    from safetensors.torch import load

    from workers.modelio.base import ModelLimits
    from workers.modelio.safetensors_checks import read_header, spec_of

    if not isinstance(data, (bytes, bytearray)) or len(data) > max_bytes:
        raise ValueError(f"A generator file is at most {max_bytes} bytes of safetensors.")
    header, _ = read_header(bytes(data), ModelLimits(max_header_bytes=min(len(data), 1_000_000)))
    spec = validate_spec(spec_of(header))
    module = ConditionalGenerator(spec)
    expected = {name: list(tensor.shape) for name, tensor in module.state_dict().items()}
    stored = {
        name: entry.get("shape") if isinstance(entry, dict) else None
        for name, entry in header.items()
        if name != "__metadata__"
    }
    if stored != expected:
        raise ValueError(
            f"The generator's tensors must be exactly {expected} for its spec, not {stored}."
        )
    if any(header[name].get("dtype") != "F32" for name in stored):
        raise ValueError("The generator's tensors must all be float32 (F32).")
    state = load(bytes(data))
    if not all(bool(torch.isfinite(tensor).all()) for tensor in state.values()):
        raise ValueError("The generator's state dict holds NaN or infinite values.")
    module.load_state_dict(state, strict=True)
    privacy, report = None, None
    declaration = header["__metadata__"].get("privacy_parameters")
    if declaration is not None:
        try:
            n_examples = int(header["__metadata__"].get("n_seed_examples", ""))
            privacy = DpSgdParameters.from_declaration(
                json.loads(declaration), n_examples=n_examples
            )
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"The generator's DP-SGD declaration is unreadable: {error}") from None
        report, _ = dp_sgd_privacy_bound(privacy)
    return TrainedGenerator(module, spec, privacy=privacy, privacy_report=report)


def fill_missing_labels(
    features, labels, trained: TrainedGenerator, target_labels, *, per_label: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """A silo's local data with ``per_label`` generated samples of each target label appended (FAug's
    augmentation step before local training)."""
    generated_features, generated_labels = trained.generate(
        list(target_labels), per_label, seed=seed
    )
    return (
        np.concatenate([np.asarray(features, dtype=np.float32), generated_features]),
        np.concatenate([np.asarray(labels, dtype=np.int64), generated_labels]),
    )


def target_labels_of(labels, n_classes: int, *, below: int) -> list[int]:
    """The labels of which a silo holds fewer than ``below`` samples: its FAug target labels."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=n_classes)
    return [label for label in range(n_classes) if counts[label] < below]


__all__ = [
    "ARCHITECTURE",
    "ConditionalDiscriminator",
    "ConditionalGenerator",
    "GanSetting",
    "GeneratorPrivacy",
    "TrainedGenerator",
    "TrainingCancelled",
    "device_server_leakage",
    "fill_missing_labels",
    "generator_spec",
    "generator_training_work",
    "load_generator",
    "save_generator",
    "target_labels_of",
    "train_generator",
    "validate_spec",
]
