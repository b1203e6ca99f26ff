"""Federated distillation (FD): Jeong, Oh, Kim, Park, Bennis, Kim, *Communication-Efficient
On-Device Machine Learning: Federated Distillation and Augmentation under Non-IID Private Data*
(2018), Algorithm 1.

Per global round:

1. Device i trains its own model on its own data. While it trains, it accumulates the logit
   vector its model outputs for every example of label ℓ; their mean is the *local average
   logit vector* ``F̄_{i,ℓ}`` (:func:`local_label_logits`; C vectors of C numbers).
2. Devices upload ``F̄_i`` (C × C numbers); the server returns to device i, per label ℓ, the
   average of the **other** devices' vectors for ℓ: ``F̂_{i,ℓ} = mean_{j ≠ i, ℓ ∈ j} F̄_{j,ℓ}``
   (:func:`fd_server_aggregate`, a pure function the market can run as rounds).
3. Next round, device i's loss on an example (x, ℓ) is the cross-entropy to ℓ plus
   ``β`` times a distillation regulariser toward ``F̂_{i,ℓ}``: here the cross-entropy from
   ``softmax(F̂_{i,ℓ})`` to ``softmax(F(x))`` (:func:`distillation_regulariser`).

A device that holds no example of ℓ uploads no vector for ℓ (the mask ``present``); a label no
other device holds gets no global vector and no regulariser (``available``).

Communication (:func:`fd_round_bits`): each device uploads and downloads C² numbers per round,
independent of the model size; FedAvg moves the model's parameters both ways
(:func:`fedavg_round_bits`).
"""

from __future__ import annotations

import numpy as np

BITS_PER_NUMBER = 32


def local_label_logits(logits, labels, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """A device's per-label mean logit vectors.

    Parameters
    ----------
    logits : (n, C) the device model's outputs on its examples; labels : (n,) their labels.

    Returns
    -------
    ``(F̄ (C, C), present (C,) bool)``: row ℓ is the mean logit vector of the examples labelled
    ℓ (zeros where the device holds none, ``present[ℓ] = False``).
    """
    logits, labels = np.asarray(logits, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    sums = np.zeros((n_classes, logits.shape[1]))
    np.add.at(sums, labels, logits)
    counts = np.bincount(labels, minlength=n_classes)
    present = counts > 0
    sums[present] /= counts[present, None]
    return sums, present


def validate_label_logits(
    logits, labels, *, n_classes: int, max_magnitude: float
) -> tuple[np.ndarray, np.ndarray]:
    """Check one silo's FD upload and return it as ``(F̄ (C, C) float64, present (C,) bool)``.

    Parameters
    ----------
    logits : nested list (C rows of C numbers)
        Row ℓ is the silo's mean logit vector on its examples of label ℓ; rows of labels it does
        not hold must be zeros.
    labels : list of int
        The class indices the silo declares it holds (distinct, in ``0 .. C-1``, at least one).
    n_classes : int
        C, the federation's number of classes.
    max_magnitude : float
        Largest |logit| accepted (the mean of log-probabilities or raw logits is far smaller; a
        huge value would let one silo swamp the others' averages).

    Raises
    ------
    ValueError
        With a sentence naming what is wrong.
    """
    if (
        not isinstance(labels, list)
        or not labels
        or len(set(map(repr, labels))) != len(labels)
        or any(
            isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < n_classes
            for label in labels
        )
    ):
        raise ValueError(
            f"'labels' must list the distinct class indices (0 to {n_classes - 1}) you hold, at least one."
        )
    if (
        not isinstance(logits, list)
        or len(logits) != n_classes
        or any(not isinstance(row, list) or len(row) != n_classes for row in logits)
    ):
        raise ValueError(
            f"'logits' must be {n_classes} rows of {n_classes} numbers (labels × classes)."
        )
    if any(
        isinstance(value, bool) or not isinstance(value, (int, float))
        for row in logits
        for value in row
    ):
        raise ValueError("'logits' must hold numbers only.")
    array = np.asarray(logits, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.abs(array).max() > max_magnitude:
        raise ValueError(f"Every logit must be finite and at most {max_magnitude:g} in magnitude.")
    present = np.zeros(n_classes, dtype=bool)
    present[labels] = True
    if np.any(array[~present] != 0):
        raise ValueError(
            "Rows of labels you did not declare must be zeros: declare every label you send a vector "
            "for in 'labels'."
        )
    return array, present


def fd_server_aggregate(
    local_logits, present, *, min_contributors: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """For every device, the average of the **other** devices' per-label logit vectors.

    Parameters
    ----------
    local_logits : array (S devices, C labels, C) of ``F̄_{i,ℓ}``
    present : bool array (S, C): device i uploaded a vector for label ℓ
    min_contributors : int
        Fewest other devices an average may be made of. An average of one other device *is* that device's
        upload, so a market that promises silos never see each other's uploads withholds averages of fewer
        than 2 (Jeong et al.'s Algorithm 1 has no such floor: 1).

    Returns
    -------
    ``(F̂ (S, C, C), available (S, C) bool)``: ``F̂[i, ℓ] = Σ_{j≠i, present[j,ℓ]} F̄[j, ℓ] / #{j≠i:
    present[j,ℓ]}``; zeros with ``available = False`` where fewer than ``min_contributors`` other devices
    hold ℓ.
    """
    if min_contributors < 1:
        raise ValueError(f"An average needs at least 1 contributor, not {min_contributors}.")
    local_logits = np.asarray(local_logits, dtype=np.float64)
    present = np.asarray(present, dtype=bool)
    masked = local_logits * present[:, :, None]
    others_sum = masked.sum(axis=0, keepdims=True) - masked  # leave-one-out sums
    others_count = present.sum(axis=0, keepdims=True) - present  # (S, C)
    available = others_count >= min_contributors
    averages = np.divide(
        others_sum,
        others_count[:, :, None],
        out=np.zeros_like(others_sum),
        where=available[:, :, None],
    )
    return averages, available


def distillation_regulariser(logits, global_logits):
    """Mean over a batch of ``CE(softmax(global_logits), softmax(logits))`` (torch tensors (b, C))."""
    import torch

    return (
        -(torch.softmax(global_logits, dim=-1) * torch.log_softmax(logits, dim=-1))
        .sum(dim=-1)
        .mean()
    )


def fd_round_bits(n_devices: int, n_classes: int, *, bits: int = BITS_PER_NUMBER) -> int:
    """Bits one FD round moves: every device uploads and downloads C × C numbers."""
    return 2 * n_devices * n_classes * n_classes * bits


def fedavg_round_bits(n_devices: int, n_parameters: int, *, bits: int = BITS_PER_NUMBER) -> int:
    """Bits one FedAvg round moves: every device downloads and uploads the whole model."""
    return 2 * n_devices * n_parameters * bits
