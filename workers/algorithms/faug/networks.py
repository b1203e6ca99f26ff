"""The conditional GAN's two networks (Mirza and Osindero 2014) and the generator's spec: MLPs over flat features
scaled to [0, 1] (MNIST's 784 pixels), small enough to train in minutes on a CPU.

The spec is the generator's whole description in JSON (``{"architecture": "conditional_generator", "n_features",
"n_classes", "latent_size", "hidden_sizes"}``); it travels beside the weights, so a file read back is checked
against it (:func:`validate_spec`) before any tensor is loaded, with limits that keep an uploaded spec from asking
for an arbitrarily large network.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

ARCHITECTURE = "conditional_generator"
SPEC_KEYS = ("architecture", "n_features", "n_classes", "latent_size", "hidden_sizes")
MAX_FEATURES = 100_000
MAX_CLASSES = 1_000
MAX_LATENT_SIZE = 1_024
MAX_WIDTH = 4_096
MAX_LAYERS = 4
MAX_PARAMETERS = 20_000_000


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
        check_spec_integer(spec[key], key, 1, maximum)
    hidden_sizes = spec["hidden_sizes"]
    if not isinstance(hidden_sizes, list) or not 1 <= len(hidden_sizes) <= MAX_LAYERS:
        raise ValueError(
            f"The generator spec's 'hidden_sizes' must be a list of 1 to {MAX_LAYERS} integers."
        )
    for width in hidden_sizes:
        check_spec_integer(width, "hidden_sizes", 1, MAX_WIDTH)
    widths = [spec["latent_size"] + spec["n_classes"], *hidden_sizes, spec["n_features"]]
    n_parameters = sum(
        width_in * width_out + width_out for width_in, width_out in zip(widths, widths[1:])
    )
    if n_parameters > MAX_PARAMETERS:
        raise ValueError(
            f"The generator spec describes {n_parameters} parameters; the limit is {MAX_PARAMETERS}."
        )
    return spec


def check_spec_integer(value, name: str, minimum: int, maximum: int) -> None:
    """ValueError unless ``value`` is an int (a bool is not) in ``minimum .. maximum``."""
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
