"""Experiment grids of the CPFL and FD reproductions (``python -m workers.reproduce cpfl|fd``).

- CPFL (Dhasade et al. 2024, Table 1 and the cohorts trade-off): Fashion-MNIST, ``N_CLIENTS``
  clients under a Dirichlet(α) label partition of the 60,000 training images, α ∈ {0.1, 1},
  K ∈ {1, 2, 4, 8, 16} cohorts; the public set is the public half of the test set, accuracy is
  on the other half (``workers.datasets.load_fashion``). Client models and student are MLPs on
  the images average-pooled 2 × 2 to 14 × 14 pixels (196 features; a 4× cheaper step on CPU).
- FD (Jeong et al. 2018, Table 1): MNIST-10k (train split 75 %), 2-10 devices holding an IID
  share each, of which two labels per device keep only 5 examples; FD vs FedAvg with the same
  models, rounds and local steps; accuracy on the test split and bits moved.

Every setting below was fixed before the first run and is not tuned on test data.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from workers.datasets import load_dataset
from workers.partition import dirichlet_label_partition
from workers.reproduce.cohort_simulation import CohortSetting, simulate_cpfl
from workers.reproduce.fd_simulation import FDSetting, simulate, starved_partition

N_CLIENTS = 100
CPFL_ALPHAS = (0.1, 1.0)
CPFL_COHORTS = (1, 2, 4, 8, 16)
CPFL_SETTING = CohortSetting(
    hidden_sizes=(64,),
    local_steps=50,
    batch_size=32,
    learning_rate=0.1,
    max_rounds=60,
    patience=3,
    validation_fraction=0.1,
    student={"family": "mlp", "hidden_sizes": [100], "epochs": 20, "batch_size": 64},
    loss="l1",
)
FD_DEVICES = (2, 4, 6, 8, 10)
FD_SETTING = FDSetting(
    hidden_sizes=(128,), rounds=20, local_steps=50, batch_size=32, learning_rate=0.05, beta=1.0
)
FD_STARVED_LABELS, FD_KEEP = 2, 5


def pooled_images(features, side: int = 28) -> np.ndarray:
    """Flat ``side × side`` images average-pooled 2 × 2: ``(n, (side / 2)²)`` float32."""
    half = side // 2
    return (
        np.asarray(features, dtype=np.float32)
        .reshape(-1, half, 2, half, 2)
        .mean(axis=(2, 4))
        .reshape(-1, half * half)
    )


def run_cpfl(seed: int, log=print, alphas=CPFL_ALPHAS, cohorts=CPFL_COHORTS) -> list[dict]:
    """Every (α, K) of the grid for one seed; one record each."""
    torch.set_num_threads(1)
    data = load_dataset("fashion", seed=seed)
    train_x, public_x, test_x = (
        pooled_images(x) for x in (data.train_x, data.public_x, data.test_x)
    )
    records = []
    for alpha in alphas:
        clients = dirichlet_label_partition(
            data.train_y, N_CLIENTS, beta=alpha, seed=seed, min_size=20
        )
        for n_cohorts in cohorts:
            started = time.perf_counter()
            result = simulate_cpfl(
                train_x,
                data.train_y,
                clients,
                public_x,
                test_x,
                data.test_y,
                n_cohorts=n_cohorts,
                n_classes=10,
                setting=CPFL_SETTING,
                seed=seed,
            )
            result.update(alpha=alpha, seed=seed, wall_seconds=time.perf_counter() - started)
            records.append(result)
            log(
                f"  [cpfl α={alpha} K={n_cohorts} seed {seed}] teacher {result['teacher']:.4f} student "
                f"{result['student']:.4f} rounds {result['rounds_to_convergence']} steps {result['client_steps']} "
                f"({result['wall_seconds']:.0f} s)"
            )
    return records


def run_fd(seed: int, log=print) -> list[dict]:
    """FD, FedAvg and local-only training for every number of devices, one seed."""
    torch.set_num_threads(1)
    data = load_dataset("mnist", seed=seed)
    records = []
    for n_devices in FD_DEVICES:
        devices = starved_partition(
            data.train_y, n_devices, n_starved=FD_STARVED_LABELS, keep=FD_KEEP, seed=seed
        )
        for protocol in ("fd", "fedavg", "local"):
            started = time.perf_counter()
            result = simulate(
                protocol,
                data.train_x,
                data.train_y,
                devices,
                data.test_x,
                data.test_y,
                n_classes=10,
                setting=FD_SETTING,
                seed=seed,
            )
            result.update(
                protocol=protocol,
                n_devices=n_devices,
                seed=seed,
                device_sizes=[int(len(d)) for d in devices],
                wall_seconds=time.perf_counter() - started,
            )
            records.append(result)
            log(
                f"  [fd {protocol} devices={n_devices} seed {seed}] accuracy {result['accuracy']:.4f} "
                f"bits {result['bits']:.3e} ({result['wall_seconds']:.0f} s)"
            )
    return records


def kernel_memory(n_points: int, solver: str, n_features: int = 108, seed: int = 0) -> dict:
    """Wall time and peak RSS growth of kernel distillation on ``n_points`` proxy points (run in a
    fresh process for a clean high-water mark)."""
    import resource

    from workers.algorithms.kernel_distillation import KernelDistilledClassifier

    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n_points, n_features))
    teacher = rng.dirichlet(np.ones(2), size=n_points)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    started = time.perf_counter()
    student = KernelDistilledClassifier(ridge=1e-3, solver=solver, max_iter=50, tol=1e-6).fit(
        features, teacher
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    residual = float(
        np.abs(
            student.decision_function(features[:500])
            + 1e-3 * student.dual_coef_[:500]
            - teacher[:500]
        ).max()
    )
    return {
        "n_points": n_points,
        "solver": solver,
        "wall_seconds": wall,
        "peak_rss_mib": after,
        "rss_growth_mib": after - before,
        "dense_matrix_mib": 8 * n_points * n_points / 2**20,
        "max_residual_first_500": residual,
        "iterations": getattr(student, "n_iter_", None),
    }
