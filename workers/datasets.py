"""The real benchmark datasets (``make data``, ``workers/data_files.py``) with the FedKT paper's split protocol.

Protocol (FedKT, section 5; ``../shared/data/README.md``): tabular sets are split at random into
train / test / public = 75 % / 12.5 % / 12.5 % (seeded and stratified by class); image sets keep
their own training set and split their test set in half, one half public, one half test.
MNIST-10k has no test set of its own, so it is split like the tabular sets.

Encodings: Adult goes through the product's own feature specification
(:func:`workers.features.infer_feature_spec` inferred on the *public* split, as a federation
does, then :func:`workers.features.encode_features`): numerics standardised, categoricals one-hot,
``?`` kept as a category of its own. MAGIC's ten numerics are standardised with the public split's
mean and deviation. Pixels are scaled to [0, 1].

The data directory is :func:`workers.data_files.data_dir` (``$ONEFOLD_DATA_DIR``, else ``var/data``, filled and
checked by ``make data``).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from workers.data_files import data_dir
from workers.features import encode_features, infer_feature_spec

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Dataset:
    """Encoded splits: float32 features, int64 labels in ``0 .. n_classes-1``."""

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    public_x: np.ndarray
    public_y: np.ndarray  # never used for training; kept for diagnostics only
    test_x: np.ndarray
    test_y: np.ndarray
    class_names: tuple[str, ...]

    @property
    def n_classes(self) -> int:
        return len(self.class_names)


def tabular_split(
    n_examples: int, labels: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indices = np.arange(n_examples)
    train, rest = train_test_split(indices, train_size=0.75, random_state=seed, stratify=labels)
    test, public = train_test_split(rest, train_size=0.5, random_state=seed, stratify=labels[rest])
    return train, public, test


def load_adult(seed: int, view: str = "one_hot") -> Dataset:
    frame = pd.read_parquet(data_dir() / "adult.parquet")
    labels = (frame.pop("income").str.strip().str.rstrip(".") == ">50K").to_numpy().astype(np.int64)
    train, public, test = tabular_split(len(frame), labels, seed)
    spec = infer_feature_spec(frame.iloc[public])
    features = encode_features(frame, spec, view=view)
    return Dataset(
        "adult",
        features[train],
        labels[train],
        features[public],
        labels[public],
        features[test],
        labels[test],
        ("<=50K", ">50K"),
    )


def load_magic(seed: int) -> Dataset:
    rows = [
        line.strip().split(",")
        for line in (data_dir() / "keel" / "magic.dat").read_text().splitlines()
        if line.strip() and not line.startswith("@")
    ]
    features = np.array([[float(value) for value in row[:-1]] for row in rows], dtype=np.float32)
    labels = np.array([row[-1].strip() == "h" for row in rows], dtype=np.int64)
    train, public, test = tabular_split(len(labels), labels, seed)
    mean, std = features[public].mean(axis=0), features[public].std(axis=0)
    features = (features - mean) / np.where(std > 0, std, 1.0)
    return Dataset(
        "magic",
        features[train],
        labels[train],
        features[public],
        labels[public],
        features[test],
        labels[test],
        ("g", "h"),
    )


def load_mnist(seed: int) -> Dataset:
    with np.load(data_dir() / "mnist10k.npz", allow_pickle=False) as archive:
        features, labels = archive["X"].astype(np.float32) / 255.0, archive["y"].astype(np.int64)
    train, public, test = tabular_split(len(labels), labels, seed)
    return Dataset(
        "mnist",
        features[train],
        labels[train],
        features[public],
        labels[public],
        features[test],
        labels[test],
        tuple(str(digit) for digit in range(10)),
    )


def _idx(path: Path, header_bytes: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=np.uint8, offset=header_bytes)


def load_fashion(seed: int) -> Dataset:
    folder = data_dir() / "fashion-mnist"
    train_x = (
        _idx(folder / "train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    )
    train_y = _idx(folder / "train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    test_x = (
        _idx(folder / "t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    )
    test_y = _idx(folder / "t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    public, test = train_test_split(
        np.arange(len(test_y)), train_size=0.5, random_state=seed, stratify=test_y
    )
    names = (
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    )
    return Dataset(
        "fashion",
        train_x,
        train_y,
        test_x[public],
        test_y[public],
        test_x[test],
        test_y[test],
        names,
    )


DATASETS = {"adult": load_adult, "magic": load_magic, "mnist": load_mnist, "fashion": load_fashion}


def load_dataset(name: str, *, seed: int, view: str = "one_hot") -> Dataset:
    """Load and split a benchmark dataset by name (``adult``, ``magic``, ``mnist``, ``fashion``); ``view`` is the
    feature specification's view of Adult's table (``one_hot`` or ``ordinal``, :mod:`workers.features`)."""
    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {sorted(DATASETS)}.")
    return load_adult(seed, view) if name == "adult" else DATASETS[name](seed)
