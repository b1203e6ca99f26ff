"""The published generator: what a silo downloads (its network, its spec and, when its discriminator was trained
with DP-SGD, the declaration and ε), its file, and generating a silo's missing labels with it.

The file is safetensors (the state dict, float32) with the spec in the metadata, never a pickle: a silo loads a file
the market sent, so :func:`load_generator` checks the spec and every tensor's name, shape and dtype before loading,
and re-accounts a DP-SGD declaration with the market's accountant rather than trusting an ε written in the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch

from workers.algorithms.faug.networks import (
    ConditionalGenerator,
    check_spec_integer,
    validate_spec,
)
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound
from workers.privacy.reports import PrivacyReport

MAX_GENERATED = 1_000_000


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
        check_spec_integer(count, "count", 0, MAX_GENERATED)
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
