"""A simulator of Cohort-Parallel Federated Learning (CPFL, Dhasade et al. 2024, sections 3 and
3.1): clients are split into K cohorts at random, each cohort runs FedAvg on its own until its
validation loss stops improving for ``patience`` rounds (its best round is kept), and the K
cohort models are distilled into one student on public data
(:func:`workers.algorithms.cohort.distil_cohorts`).

All clients of all cohorts train side by side as one :class:`StackedMLP`; FedAvg averages inside
each cohort (weighted by the clients' training-example counts); a stopped cohort's models no
longer change and its clients' steps are no longer counted. Every cohort starts from one shared
initialisation. Validation: each client holds out ``validation_fraction`` of its own examples; a
cohort's validation loss is its model's mean cross-entropy over its clients' held-out examples.

Cost, as the paper counts it: *rounds to convergence* is the largest number of rounds any cohort
ran (cohorts run in parallel, so this is the wall-clock time), *client training steps* sums
``local_steps`` over every active client of every round (the resources spent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional

from workers.algorithms.cohort import cohort_teacher_logits, distil_cohorts
from workers.reproduce.stacked_mlp import StackedMLP, client_batches


@dataclass(frozen=True)
class CohortSetting:
    """Client models and FedAvg (MLP widths, SGD steps per round, batch, learning rate), the stopping
    rule (``max_rounds``, ``patience``), the validation share, and the student and its loss."""

    hidden_sizes: tuple[int, ...] = (100,)
    local_steps: int = 10
    batch_size: int = 32
    learning_rate: float = 0.05
    max_rounds: int = 100
    patience: int = 5
    validation_fraction: float = 0.1
    student: dict = field(
        default_factory=lambda: {
            "family": "mlp",
            "hidden_sizes": [100],
            "epochs": 20,
            "batch_size": 64,
        }
    )
    loss: str = "l1"


def _split_validation(clients, fraction: float, rng) -> tuple[list[np.ndarray], list[np.ndarray]]:
    train, validation = [], []
    for indices in clients:
        shuffled = rng.permutation(indices)
        n_validation = max(1, int(round(fraction * len(indices))))
        validation.append(shuffled[:n_validation])
        train.append(shuffled[n_validation:] if len(indices) > n_validation else shuffled)
    return train, validation


def simulate_cpfl(
    features,
    labels,
    clients: list[np.ndarray],
    public_x,
    test_x,
    test_y,
    *,
    n_cohorts: int,
    n_classes: int,
    setting: CohortSetting,
    seed: int,
) -> dict:
    """Run CPFL with ``n_cohorts`` cohorts over ``clients`` (index arrays into ``features``).

    Returns accuracies on the test set (``teacher``: the weighted-logit teacher, ``cohorts``: each
    cohort model, ``student``), ``rounds`` (per cohort, rounds run), ``rounds_to_convergence``
    (max), ``client_steps`` (total) and ``best_rounds`` (round of each cohort's kept model).
    """
    rng = np.random.default_rng(seed)
    features = np.asarray(features, dtype=np.float32)
    labels = np.asarray(labels, dtype=np.int64)
    cohort_of = np.empty(len(clients), dtype=np.int64)
    for cohort, members in enumerate(np.array_split(rng.permutation(len(clients)), n_cohorts)):
        cohort_of[members] = cohort
    train, validation = _split_validation(clients, setting.validation_fraction, rng)
    stacked = StackedMLP(
        len(clients), features.shape[1], setting.hidden_sizes, n_classes, seed=seed, same_init=True
    )
    representative = np.array([np.flatnonzero(cohort_of == k)[0] for k in range(n_cohorts)])
    validation_of = [
        np.concatenate([validation[c] for c in np.flatnonzero(cohort_of == k)])
        for k in range(n_cohorts)
    ]
    inputs, targets = torch.as_tensor(features), torch.as_tensor(labels)
    weights = np.array([len(t) for t in train], dtype=np.float64)
    active = np.ones(n_cohorts, dtype=bool)
    best_loss, best_round = np.full(n_cohorts, np.inf), np.zeros(n_cohorts, dtype=np.int64)
    rounds, stale, steps = (
        np.zeros(n_cohorts, dtype=np.int64),
        np.zeros(n_cohorts, dtype=np.int64),
        0,
    )
    best = stacked.snapshot()
    for round_number in range(1, setting.max_rounds + 1):
        if not active.any():
            break
        clients_active = active[cohort_of]
        for _ in range(setting.local_steps):
            batch = torch.as_tensor(client_batches(train, setting.batch_size, rng))
            logits = stacked.forward(inputs[batch])
            loss = (
                functional.cross_entropy(
                    logits.reshape(-1, n_classes), targets[batch].reshape(-1), reduction="sum"
                )
                / setting.batch_size
            )
            stacked.sgd_step(loss, setting.learning_rate, active=clients_active)
        stacked.average(cohort_of, weights)
        steps += setting.local_steps * int(clients_active.sum())
        rounds[active] += 1
        current = None
        for cohort in np.flatnonzero(active):
            rows = validation_of[cohort]
            logits = stacked.logits(features[rows], [representative[cohort]])[0]
            loss = float(
                functional.cross_entropy(torch.as_tensor(logits), torch.as_tensor(labels[rows]))
            )
            if loss < best_loss[cohort]:
                best_loss[cohort], best_round[cohort], stale[cohort] = loss, round_number, 0
                members = np.flatnonzero(cohort_of == cohort)
                current = current or stacked.snapshot()
                for saved, now in zip(best, current):
                    saved[members] = now[members]
            else:
                stale[cohort] += 1
                active[cohort] = stale[cohort] < setting.patience
    stacked.restore(best, np.arange(len(clients)))
    counts = np.stack(
        [
            np.bincount(
                labels[np.concatenate([train[c] for c in np.flatnonzero(cohort_of == k)])],
                minlength=n_classes,
            )
            for k in range(n_cohorts)
        ]
    )
    public_logits = stacked.logits(public_x, representative)
    test_logits = stacked.logits(test_x, representative)
    teacher = cohort_teacher_logits(test_logits, counts).argmax(axis=1)
    student = distil_cohorts(
        setting.student, public_x, public_logits, counts, loss=setting.loss, seed=seed
    )
    test_y = np.asarray(test_y)
    return {
        "n_cohorts": n_cohorts,
        "teacher": float(np.mean(teacher == test_y)),
        "cohorts": (test_logits.argmax(axis=2) == test_y[None]).mean(axis=1).tolist(),
        "student": float(np.mean(student.predict(test_x) == test_y)),
        "rounds": rounds.tolist(),
        "best_rounds": best_round.tolist(),
        "rounds_to_convergence": int(rounds.max()),
        "client_steps": int(steps),
    }
