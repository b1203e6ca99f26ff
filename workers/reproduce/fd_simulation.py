"""A simulator of federated distillation (FD, Jeong et al. 2018, Algorithm 1) and of FedAvg, the
paper's benchmark, on the same devices, with the bits each protocol moves.

Devices train zoo-style MLPs side by side (:class:`~workers.reproduce.stacked_mlp.StackedMLP`).
One round is ``local_steps`` SGD steps on each device's own mini-batches, then the exchange:

- FD: each device's per-label average logits, accumulated over the round's steps, go to the
  server (:func:`~workers.algorithms.fd.fd_server_aggregate`); the next round adds
  ``beta · CE(softmax(F̂_{i,ℓ}), softmax(F(x)))`` to device i's loss. Accuracy: the devices'
  own models on the test set (FD has no global model), mean over devices.
- FedAvg: the models (which start from one initialisation) are averaged, weighted by the
  devices' example counts. Accuracy: the global model.
- local: every device trains alone (no exchange, no bits): the baseline both protocols must beat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional

from workers.algorithms.fd import fd_round_bits, fd_server_aggregate, fedavg_round_bits
from workers.reproduce.stacked_mlp import StackedMLP, client_batches


@dataclass(frozen=True)
class FDSetting:
    """Model and training of every device: MLP widths, rounds, SGD steps per round, batch size,
    learning rate, and ``beta``, the weight of FD's distillation regulariser."""

    hidden_sizes: tuple[int, ...] = (128,)
    rounds: int = 20
    local_steps: int = 50
    batch_size: int = 32
    learning_rate: float = 0.05
    beta: float = 1.0


def starved_partition(
    labels, n_devices: int, *, n_starved: int, keep: int, seed: int
) -> list[np.ndarray]:
    """An IID split over devices, then on each device ``n_starved`` labels drawn at random keep only
    ``keep`` examples (the FD paper's non-IID setting: a few target labels nearly missing)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    devices = []
    for part in np.array_split(rng.permutation(len(labels)), n_devices):
        starved = rng.choice(classes, size=n_starved, replace=False)
        kept = [
            part[labels[part] == label][: keep if label in starved else None] for label in classes
        ]
        devices.append(np.sort(np.concatenate(kept)))
    return devices


def _accuracy(stacked: StackedMLP, test_x, test_y, models) -> np.ndarray:
    return (stacked.logits(test_x, models).argmax(axis=2) == np.asarray(test_y)[None]).mean(axis=1)


def simulate(
    protocol: str,
    features,
    labels,
    devices: list[np.ndarray],
    test_x,
    test_y,
    *,
    n_classes: int,
    setting: FDSetting,
    seed: int,
) -> dict:
    """Run ``protocol`` ("fd", "fedavg" or "local") and return per-round accuracy and cumulative bits.

    Returns ``{"accuracy": final, "device_accuracies": [...], "bits": total, "curve": [{"round",
    "accuracy", "bits"}], "n_parameters": per model}``.
    """
    if protocol not in ("fd", "fedavg", "local"):
        raise ValueError(f"Unknown protocol {protocol!r}; use 'fd', 'fedavg' or 'local'.")
    inputs = torch.as_tensor(np.asarray(features, dtype=np.float32))
    targets = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    n_devices = len(devices)
    stacked = StackedMLP(
        n_devices,
        inputs.shape[1],
        setting.hidden_sizes,
        n_classes,
        seed=seed,
        same_init=protocol == "fedavg",
    )
    rng = np.random.default_rng(seed)
    sizes = np.array([len(device) for device in devices], dtype=np.float64)
    global_logits = torch.zeros(n_devices, n_classes, n_classes)
    available = torch.zeros(n_devices, n_classes, dtype=torch.bool)
    bits, curve = 0, []
    for round_number in range(1, setting.rounds + 1):
        sums = torch.zeros(n_devices * n_classes, n_classes)
        counts = torch.zeros(n_devices * n_classes)
        for _ in range(setting.local_steps):
            batch = torch.as_tensor(client_batches(devices, setting.batch_size, rng))
            batch_labels = targets[batch]  # (m, b)
            logits = stacked.forward(inputs[batch])  # (m, b, C)
            loss = (
                functional.cross_entropy(
                    logits.reshape(-1, n_classes), batch_labels.reshape(-1), reduction="sum"
                )
                / setting.batch_size
            )
            if protocol == "fd" and available.any():
                device_rows = torch.arange(n_devices).view(-1, 1).expand_as(batch_labels)
                teacher = global_logits[device_rows, batch_labels]  # (m, b, C)
                mask = available[device_rows, batch_labels].float()
                cross = -(torch.softmax(teacher, -1) * torch.log_softmax(logits, -1)).sum(-1)
                loss = loss + setting.beta * (cross * mask).sum() / setting.batch_size
            stacked.sgd_step(loss, setting.learning_rate)
            if protocol == "fd":
                slots = (torch.arange(n_devices).view(-1, 1) * n_classes + batch_labels).reshape(-1)
                sums.index_add_(0, slots, logits.detach().reshape(-1, n_classes))
                counts.index_add_(0, slots, torch.ones(len(slots)))
        if protocol == "fd":
            present = (counts > 0).view(n_devices, n_classes).numpy()
            local = (
                (sums / counts.clamp(min=1).unsqueeze(1))
                .view(n_devices, n_classes, n_classes)
                .numpy()
            )
            averaged, available_np = fd_server_aggregate(local, present)
            global_logits, available = (
                torch.as_tensor(averaged, dtype=torch.float32),
                torch.as_tensor(available_np),
            )
            bits += fd_round_bits(n_devices, n_classes)
        elif protocol == "fedavg":
            stacked.average(np.zeros(n_devices, dtype=np.int64), sizes)
            bits += fedavg_round_bits(n_devices, stacked.n_parameters())
        models = np.array([0]) if protocol == "fedavg" else np.arange(n_devices)
        curve.append(
            {
                "round": round_number,
                "accuracy": float(_accuracy(stacked, test_x, test_y, models).mean()),
                "bits": int(bits),
            }
        )
    device_accuracies = _accuracy(stacked, test_x, test_y, np.arange(n_devices))
    return {
        "accuracy": curve[-1]["accuracy"],
        "device_accuracies": device_accuracies.tolist(),
        "bits": int(bits),
        "curve": curve,
        "n_parameters": stacked.n_parameters(),
    }
