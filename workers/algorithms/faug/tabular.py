"""FAug's conditional tabular generator: a CTGAN (Xu et al. 2019, *Modeling Tabular Data using Conditional GAN*)
of our own on torch, numpy and scikit-learn, trained on the pooled seeds with the label a discrete conditioning
column, and sampled conditionally on each label.

The method is the paper's: each continuous column is encoded by a mode-specific normalisation (a Bayesian Gaussian
mixture per column; a value becomes its mode, one-hot, and its offset from that mode's mean in units of 4 standard
deviations, in [-1, 1]), each discrete column one-hot; the generator reads noise and a conditional vector (one
category of one discrete column), and training-by-sampling draws the column uniformly, the category with
probability proportional to the log of its frequency and a seed row of that category as the real example; the
generator's loss adds the cross-entropy of the conditioned column; the discriminator reads a "pac" of rows at once
(PacGAN) and is trained as a WGAN with gradient penalty. Until issue 30 this module wrapped the ``ctgan`` package,
whose Business Source License excludes a synthetic-data service such as this market's FAug.

The market publishes the rows it generates, never the model (the published artefact stays the samples file, read
without pickle), so :func:`tabular_samples` returns ``rows_per_label`` rows of every label, written by
:func:`workers.algorithms.faug.samples.samples_save`.

Which columns are discrete: seeds arrive as numbers only, so a feature column is treated as discrete when its seed
values are all integers and take at most :data:`DISCRETE_MAX_VALUES` distinct values (a label-encoded category, a
flag, a small count), and continuous otherwise. The label is always discrete. Generated continuous values are
clipped to the seeds' range per column.

No DP: the discriminator is trained with a WGAN gradient penalty (a gradient of the discriminator with respect to
interpolated rows, mixed across a pac of rows), which per-example DP-SGD (Opacus) cannot clip per seed; a private
generator is the MLP GAN of :mod:`workers.algorithms.faug.training`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture
from torch import nn
from torch.nn import functional

from workers.algorithms.faug.training import TrainingCancelled

DISCRETE_MAX_VALUES = 10
MAX_PAC = 10
MAX_SAMPLING_ROUNDS = 20
MAX_MODES = 10  # the paper's mixture components per continuous column
MODE_MIN_WEIGHT = 0.005  # a mixture component lighter than this is not a mode
GUMBEL_TEMPERATURE = 0.2
GRADIENT_PENALTY_WEIGHT = 10.0
LEARNING_RATE = 2e-4
WEIGHT_DECAY = 1e-6


@dataclass(frozen=True)
class TabularSetting:
    """CTGAN's training: ``epochs`` passes over the seeds in batches of ``batch_size`` (made even and a multiple of
    the "pac", the rows the discriminator reads together), small networks for a few hundred seeds."""

    epochs: int = 300
    batch_size: int = 50
    embedding_dim: int = 64
    hidden_sizes: tuple[int, ...] = (128, 128)


def discrete_columns(features: np.ndarray) -> list[int]:
    """Indices of the feature columns CTGAN treats as discrete: all seed values integers, at most
    :data:`DISCRETE_MAX_VALUES` distinct ones."""
    return [
        column
        for column in range(features.shape[1])
        if np.array_equal(features[:, column], np.round(features[:, column]))
        and len(np.unique(features[:, column])) <= DISCRETE_MAX_VALUES
    ]


@dataclass(frozen=True)
class _Continuous:
    """A continuous column's modes: their means and standard deviations (4σ is one unit of the offset)."""

    means: np.ndarray
    stds: np.ndarray

    @classmethod
    def fitted(cls, values: np.ndarray, seed: int) -> _Continuous:
        distinct = len(np.unique(values))
        if distinct < 2:
            return cls(np.array([values[0]]), np.array([1.0]))
        mixture = BayesianGaussianMixture(
            n_components=min(MAX_MODES, distinct),
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=0.001,
            max_iter=100,
            random_state=seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # a few hundred seeds
            mixture.fit(values.reshape(-1, 1))
        active = mixture.weights_ > MODE_MIN_WEIGHT
        spread = float(np.ptp(values))
        stds = np.sqrt(mixture.covariances_.reshape(-1)[active])
        return cls(mixture.means_.reshape(-1)[active], np.maximum(stds, 1e-3 * spread))

    @property
    def width(self) -> int:
        return 1 + len(self.means)

    def encoded(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each value's offset from a mode drawn by its posterior under the mixture, and that mode one-hot."""
        log_density = -0.5 * ((values[:, None] - self.means) / self.stds) ** 2 - np.log(self.stds)
        posterior = np.exp(log_density - log_density.max(axis=1, keepdims=True))
        posterior /= posterior.sum(axis=1, keepdims=True)
        cumulative = posterior.cumsum(axis=1)
        modes = np.minimum(
            (cumulative < rng.random((len(values), 1))).sum(axis=1), len(self.means) - 1
        )
        offsets = (values - self.means[modes]) / (4 * self.stds[modes])
        return np.column_stack([np.clip(offsets, -0.99, 0.99), np.eye(len(self.means))[modes]])

    def decoded(self, block: np.ndarray) -> np.ndarray:
        modes = block[:, 1:].argmax(axis=1)
        return np.clip(block[:, 0], -1, 1) * 4 * self.stds[modes] + self.means[modes]


@dataclass(frozen=True)
class _Discrete:
    """A discrete column's categories, one-hot in this order."""

    categories: np.ndarray

    @property
    def width(self) -> int:
        return len(self.categories)

    def encoded(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return (values[:, None] == self.categories[None, :]).astype(np.float64)

    def decoded(self, block: np.ndarray) -> np.ndarray:
        return self.categories[block.argmax(axis=1)]


class _Generator(nn.Module):
    """The paper's generator: residual blocks (linear, batch norm, ReLU, concatenated with their input)."""

    def __init__(self, input_width: int, hidden_sizes: tuple[int, ...], data_width: int):
        super().__init__()
        self.blocks = nn.ModuleList()
        width = input_width
        for size in hidden_sizes:
            self.blocks.append(
                nn.Sequential(nn.Linear(width, size), nn.BatchNorm1d(size), nn.ReLU())
            )
            width += size
        self.output = nn.Linear(width, data_width)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            inputs = torch.cat([block(inputs), inputs], dim=1)
        return self.output(inputs)


def _discriminator(input_width: int, hidden_sizes: tuple[int, ...], pac: int) -> nn.Sequential:
    """The paper's critic over a pac of rows: linear, leaky ReLU 0.2 and dropout 0.5 per hidden layer."""
    layers: list[nn.Module] = []
    width = input_width * pac
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.LeakyReLU(0.2), nn.Dropout(0.5)]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, 1))


class _Ctgan:
    """One CTGAN fitted on a table of raw columns; ``discrete`` are the discrete columns' indices (conditioned on)."""

    def __init__(self, table: np.ndarray, discrete: list[int], setting: TabularSetting, seed: int):
        self.rng = np.random.default_rng(seed)
        self.categories = {c: np.unique(table[:, c]) for c in discrete}
        self.columns: list[_Discrete | _Continuous] = [
            _Discrete(self.categories[c])
            if c in discrete
            else _Continuous.fitted(table[:, c], seed)
            for c in range(table.shape[1])
        ]
        self.spans = np.cumsum([0] + [column.width for column in self.columns])
        self.discrete = discrete
        self.condition_offsets = np.cumsum([0] + [self.columns[c].width for c in discrete])
        self.setting = setting
        self.table = table
        self.data = torch.tensor(
            np.column_stack(
                [column.encoded(table[:, c], self.rng) for c, column in enumerate(self.columns)]
            ),
            dtype=torch.float32,
        )
        # training-by-sampling: the rows of each category of each discrete column, categories drawn by log frequency
        self.rows_of = [
            [np.flatnonzero(table[:, c] == value) for value in self.categories[c]] for c in discrete
        ]
        self.category_weights = [
            np.log1p([len(rows) for rows in column_rows])
            / np.log1p([len(rows) for rows in column_rows]).sum()
            for column_rows in self.rows_of
        ]
        condition_width = int(self.condition_offsets[-1])
        self.generator = _Generator(
            setting.embedding_dim + condition_width, setting.hidden_sizes, self.data.shape[1]
        )

    def activated(self, raw: torch.Tensor) -> torch.Tensor:
        """tanh for offsets, Gumbel-softmax for one-hot blocks (modes and categories)."""
        parts = []
        for c, column in enumerate(self.columns):
            block = raw[:, self.spans[c] : self.spans[c + 1]]
            if isinstance(column, _Continuous):
                parts += [
                    torch.tanh(block[:, :1]),
                    functional.gumbel_softmax(block[:, 1:], tau=GUMBEL_TEMPERATURE),
                ]
            else:
                parts.append(functional.gumbel_softmax(block, tau=GUMBEL_TEMPERATURE))
        return torch.cat(parts, dim=1)

    def conditions(self, size: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        """Training-by-sampling: a conditional vector per row, its column (index into ``discrete``), category."""
        chosen_columns = self.rng.integers(len(self.discrete), size=size)
        chosen_categories = np.array(
            [
                self.rng.choice(len(self.category_weights[c]), p=self.category_weights[c])
                for c in chosen_columns
            ]
        )
        vector = np.zeros((size, int(self.condition_offsets[-1])), dtype=np.float32)
        vector[np.arange(size), self.condition_offsets[chosen_columns] + chosen_categories] = 1
        return torch.from_numpy(vector), chosen_columns, chosen_categories

    def generated(self, condition: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.randn(len(condition), self.setting.embedding_dim)
        raw = self.generator(torch.cat([noise, condition], dim=1))
        return raw, self.activated(raw)

    def condition_loss(
        self, raw: torch.Tensor, columns: np.ndarray, categories: np.ndarray
    ) -> torch.Tensor:
        """Cross-entropy of each row's conditioned column against the category it was conditioned on."""
        losses = []
        for row_column in np.unique(columns):
            rows = np.flatnonzero(columns == row_column)
            c = self.discrete[row_column]
            logits = raw[rows, self.spans[c] : self.spans[c + 1]]
            losses.append(
                functional.cross_entropy(
                    logits, torch.from_numpy(categories[rows]), reduction="sum"
                )
            )
        return torch.stack(losses).sum() / len(columns)

    def fit(self, batch_size: int, pac: int, stop_requested: Callable[[], bool]) -> None:
        condition_width = int(self.condition_offsets[-1])
        critic_width = (self.data.shape[1] + condition_width) * pac
        critic = _discriminator(
            self.data.shape[1] + condition_width, self.setting.hidden_sizes, pac
        )
        generator_optimizer = torch.optim.Adam(
            self.generator.parameters(),
            lr=LEARNING_RATE,
            betas=(0.5, 0.9),
            weight_decay=WEIGHT_DECAY,
        )
        critic_optimizer = torch.optim.Adam(
            critic.parameters(), lr=LEARNING_RATE, betas=(0.5, 0.9), weight_decay=WEIGHT_DECAY
        )

        def checked_step(optimizer: torch.optim.Optimizer) -> None:
            optimizer.step()
            if stop_requested():
                raise TrainingCancelled("The training was cancelled.")

        def score(rows: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
            return critic(torch.cat([rows, condition], dim=1).reshape(-1, critic_width))

        steps_per_epoch = max(len(self.table) // batch_size, 1)
        for _ in range(self.setting.epochs * steps_per_epoch):
            condition, columns, categories = self.conditions(batch_size)
            _, fake = self.generated(condition)
            real_condition = condition[self.rng.permutation(batch_size)]
            real_rows = self._real_rows(real_condition)
            real = self.data[real_rows]
            fake = fake.detach()
            mix = torch.rand(batch_size // pac, 1, 1).expand(
                -1, pac, real.shape[1] + condition_width
            )
            between = (
                mix.reshape(batch_size, -1) * torch.cat([real, real_condition], dim=1)
                + (1 - mix.reshape(batch_size, -1)) * torch.cat([fake, condition], dim=1)
            ).requires_grad_(True)
            between_score = critic(between.reshape(-1, critic_width))
            (gradient,) = torch.autograd.grad(between_score.sum(), between, create_graph=True)
            penalty = (
                (gradient.reshape(-1, pac * between.shape[1]).norm(2, dim=1) - 1) ** 2
            ).mean()
            critic_loss = (
                score(fake, condition).mean()
                - score(real, real_condition).mean()
                + GRADIENT_PENALTY_WEIGHT * penalty
            )
            critic_optimizer.zero_grad(set_to_none=True)
            critic_loss.backward()
            checked_step(critic_optimizer)

            condition, columns, categories = self.conditions(batch_size)
            raw, fake = self.generated(condition)
            generator_loss = -score(fake, condition).mean() + self.condition_loss(
                raw, columns, categories
            )
            generator_optimizer.zero_grad(set_to_none=True)
            generator_loss.backward()
            checked_step(generator_optimizer)

    def _real_rows(self, condition: torch.Tensor) -> np.ndarray:
        """A seed row of each row's conditioned category (the condition's one non-zero entry)."""
        hot = condition.argmax(dim=1).numpy()
        columns = np.searchsorted(self.condition_offsets, hot, side="right") - 1
        return np.array(
            [
                self.rng.choice(self.rows_of[c][index - self.condition_offsets[c]])
                for c, index in zip(columns, hot, strict=True)
            ]
        )

    @torch.no_grad()
    def sampled(self, count: int, column: int, category: int) -> np.ndarray:
        """``count`` decoded rows generated under the condition "discrete column ``column`` is ``category``"."""
        self.generator.eval()
        condition = torch.zeros(count, int(self.condition_offsets[-1]))
        condition[:, self.condition_offsets[self.discrete.index(column)] + category] = 1
        _, rows = self.generated(condition)
        rows_array = rows.numpy().astype(np.float64)
        return np.column_stack(
            [
                col.decoded(rows_array[:, self.spans[c] : self.spans[c + 1]])
                for c, col in enumerate(self.columns)
            ]
        )


def tabular_samples(
    features,
    labels,
    *,
    n_classes: int,
    rows_per_label: int,
    setting: TabularSetting = TabularSetting(),
    seed: int,
    stop_requested: Callable[[], bool] = lambda: False,
) -> tuple[np.ndarray, np.ndarray]:
    """Train a CTGAN on the pooled seeds and generate ``rows_per_label`` rows of every label it saw.

    Parameters
    ----------
    features : array of shape (n, n_features)
        Seed samples, finite numbers.
    labels : array of shape (n,)
        Their labels in ``0 .. n_classes - 1``.
    n_classes : int
    rows_per_label : int
        Rows generated for each label among the seeds (labels no silo seeded get none).
    setting : TabularSetting
    seed : int
        Seeds every draw (the mixtures, numpy's and torch's draws of training and sampling); runs on the CPU and
        leaves torch's global random state as it found it.
    stop_requested : callable returning bool
        Asked after every optimiser step of the fit (the discriminator's, then the generator's); when it returns
        True the fit stops with :class:`workers.algorithms.faug.training.TrainingCancelled`.

    Returns
    -------
    (numpy.ndarray of float32, numpy.ndarray of int64)
        Generated features (seeded labels × rows_per_label, n_features) and their labels, each label's rows
        together in increasing label order. Sampling is conditioned on the label and rows whose generated
        label differs are dropped, at most :data:`MAX_SAMPLING_ROUNDS` rounds; a label may get fewer rows.
    """
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if features.ndim != 2 or len(features) != len(labels) or len(labels) < 2:
        raise ValueError(
            "Seeds must be an (n, n_features) matrix of at least 2 rows, one label each."
        )
    if not np.isfinite(features).all():
        raise ValueError("Seed features must be finite numbers.")
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"Seed labels must lie in 0 .. {n_classes - 1}.")
    if rows_per_label < 1:
        raise ValueError(f"Generate at least one row per label, not {rows_per_label}.")
    n_features = features.shape[1]
    table = np.column_stack([features, labels.astype(np.float64)])
    batch_size = max(2, setting.batch_size - setting.batch_size % 2)
    pac = max(p for p in range(1, MAX_PAC + 1) if batch_size % p == 0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _Ctgan(table, discrete_columns(features) + [n_features], setting, seed)
        model.generator.train()
        model.fit(batch_size, pac, stop_requested)
        seeded = np.unique(labels)
        generated = [
            _rows_of(
                model,
                n_features,
                int(np.flatnonzero(model.categories[n_features] == label)[0]),
                rows_per_label,
            )
            for label in seeded
        ]
    rows = np.concatenate(generated)
    low, high = features.min(axis=0), features.max(axis=0)
    return (
        np.clip(rows[:, :n_features], low, high).astype(np.float32),
        rows[:, n_features].astype(np.int64),
    )


def _rows_of(model: _Ctgan, label_column: int, category: int, count: int) -> np.ndarray:
    """Up to ``count`` generated rows of the label's category (conditional sampling, mismatches dropped)."""
    label = model.categories[label_column][category]
    kept: list[np.ndarray] = []
    found = 0
    for _ in range(MAX_SAMPLING_ROUNDS):
        drawn = model.sampled(count, label_column, category)
        matching = drawn[drawn[:, label_column] == label]
        kept.append(matching)
        found += len(matching)
        if found >= count:
            break
    return np.concatenate(kept)[:count]


__all__ = ["DISCRETE_MAX_VALUES", "TabularSetting", "discrete_columns", "tabular_samples"]
