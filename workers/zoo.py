"""Onefold's model zoo: the torch architectures a JSON spec may name.

Uploaded torch models are a safetensors state dict plus a spec such as
``{"architecture": "mlp", "n_features": 108, "hidden_sizes": [100, 100], "n_classes": 2}``.
The module is built from this zoo only, never from code in the upload, so the spec is
validated (names, integer ranges, parameter count) before any tensor is allocated.

Every architecture reads the same flat ``(n_examples, n_features)`` float32 matrix that every
other model family reads; the CNN reshapes it to ``image_shape`` itself.
"""

from __future__ import annotations

import math

import torch
from torch import nn

MAX_LAYER_WIDTH = 4096
MAX_LAYERS = 8
MAX_PARAMETERS = 20_000_000


class SpecError(ValueError):
    """A model spec that the zoo cannot or will not build."""


def _positive_int(spec: dict, key: str, *, maximum: int) -> int:
    value = spec.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= maximum:
        raise SpecError(
            f"The spec's '{key}' must be an integer between 1 and {maximum}, not {value!r}."
        )
    return value


def _int_list(spec: dict, key: str, *, maximum_length: int) -> list[int]:
    values = spec.get(key)
    if not isinstance(values, list) or not 1 <= len(values) <= maximum_length:
        raise SpecError(f"The spec's '{key}' must be a list of 1 to {maximum_length} integers.")
    return [_positive_int({key: value}, key, maximum=MAX_LAYER_WIDTH) for value in values]


class MLP(nn.Module):
    """Fully connected network with ReLU activations; outputs logits."""

    def __init__(self, n_features: int, hidden_sizes: list[int], n_classes: int):
        super().__init__()
        widths = [n_features, *hidden_sizes]
        layers: list[nn.Module] = []
        for width_in, width_out in zip(widths, widths[1:]):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], n_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


class CNN(nn.Module):
    """LeNet-style network of the FedKT paper: conv(5x5) + max-pool blocks, then fully connected."""

    def __init__(
        self,
        image_shape: list[int],
        conv_channels: list[int],
        kernel_size: int,
        hidden_sizes: list[int],
        n_classes: int,
    ):
        super().__init__()
        self.image_shape = tuple(image_shape)
        channels, height, width = image_shape
        blocks: list[nn.Module] = []
        for channels_out in conv_channels:
            blocks += [nn.Conv2d(channels, channels_out, kernel_size), nn.ReLU(), nn.MaxPool2d(2)]
            channels, height, width = (
                channels_out,
                (height - kernel_size + 1) // 2,
                (width - kernel_size + 1) // 2,
            )
            if height < 1 or width < 1:
                raise SpecError(
                    "The spec's convolutions shrink the image below one pixel; use fewer or smaller ones."
                )
        self.convolutions = nn.Sequential(*blocks)
        self.head = MLP(channels * height * width, hidden_sizes, n_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        images = features.reshape(-1, *self.image_shape)
        return self.head(self.convolutions(images).flatten(1))


def n_features_of(spec: dict) -> int:
    """Number of input features the spec's module reads."""
    if spec.get("architecture") == "cnn":
        return math.prod(spec["image_shape"])
    return spec["n_features"]


def build_module(spec: dict) -> nn.Module:
    """Build the zoo module a validated JSON spec describes, with freshly initialised weights.

    The parameter count is checked on torch's ``meta`` device first, so an oversized spec
    allocates no memory.

    Raises
    ------
    SpecError
        If the architecture is unknown, a size is out of range, or the module would have more
        than ``MAX_PARAMETERS`` parameters.
    """
    with torch.device("meta"):
        n_parameters = sum(parameter.numel() for parameter in _build(spec).parameters())
    if n_parameters > MAX_PARAMETERS:
        raise SpecError(
            f"The spec describes {n_parameters} parameters; the limit is {MAX_PARAMETERS}."
        )
    return _build(spec)


def _build(spec: dict) -> nn.Module:
    if not isinstance(spec, dict):
        raise SpecError("The model spec must be a JSON object.")
    architecture = spec.get("architecture")
    n_classes = _positive_int(spec, "n_classes", maximum=10_000)
    hidden_sizes = _int_list(spec, "hidden_sizes", maximum_length=MAX_LAYERS)
    if architecture == "mlp":
        n_features = _positive_int(spec, "n_features", maximum=1_000_000)
        module: nn.Module = MLP(n_features, hidden_sizes, n_classes)
    elif architecture == "cnn":
        image_shape = spec.get("image_shape")
        if not isinstance(image_shape, list) or len(image_shape) != 3:
            raise SpecError("The spec's 'image_shape' must be [channels, height, width].")
        image_shape = [
            _positive_int({"image_shape": v}, "image_shape", maximum=1024) for v in image_shape
        ]
        conv_channels = _int_list(spec, "conv_channels", maximum_length=MAX_LAYERS)
        kernel_size = _positive_int(spec, "kernel_size", maximum=15)
        module = CNN(image_shape, conv_channels, kernel_size, hidden_sizes, n_classes)
    else:
        raise SpecError(f"Unknown architecture {architecture!r}; the zoo has 'mlp' and 'cnn'.")
    return module
