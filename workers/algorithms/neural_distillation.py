"""Neural distillation of a teacher into a torch student from the model zoo.

Hinton, Vinyals, Dean, *Distilling the Knowledge in a Neural Network* (2015), section 2: the
student's logits ``z`` are softened with a temperature ``T`` and pulled toward the teacher's
softened probabilities by ``T² · KL(p_T ‖ softmax(z / T))``, optionally mixed with the
cross-entropy to the teacher's arg-max ("hard") labels::

    loss = (1 − w) · T² · KL(p_T ‖ softmax(z/T)) + w · CE(z, argmax p)

where ``p_T = softmax(log p / T)`` and ``w = hard_label_weight``. Guha et al. (*One-Shot
Federated Learning*, section 3) distil their ensembles this way for neural students; CPFL
(*Cohort-Parallel Federated Learning*, section 3.1) uses the L1 distance between the student's
and the teacher's logits instead (``loss="l1"``).

The student is a :class:`~workers.learners.TorchClassifier` fitted here (``module_``, ``spec_``,
``classes_ = arange(C)``), so it exports like any other zoo network (safetensors + ONNX).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from workers.algorithms.logits import PROBABILITY_FLOOR
from workers.learners import Learner, TorchClassifier, best_device, seeded_learner
from workers.zoo import build_module


def soften(probabilities, temperature: float) -> np.ndarray:
    """``softmax(log p / T)``: the teacher's probabilities at temperature ``T`` (rows sum to 1)."""
    logits = (
        np.log(np.clip(np.asarray(probabilities, dtype=np.float64), PROBABILITY_FLOOR, None))
        / temperature
    )
    logits -= logits.max(axis=1, keepdims=True)
    softened = np.exp(logits)
    return softened / softened.sum(axis=1, keepdims=True)


def train_module(
    module: nn.Module,
    n_examples: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    *,
    epochs: int,
    batch_size: int,
    optimizer: torch.optim.Optimizer,
    rng: np.random.Generator,
    device,
) -> None:
    """Mini-batch training: every epoch shuffles ``range(n_examples)`` with ``rng`` and steps
    ``optimizer`` on ``batch_loss(indices)`` for each batch of indices (a tensor on ``device``)."""
    module.train()
    for _ in range(epochs):
        order = torch.from_numpy(rng.permutation(n_examples)).to(device)
        for start in range(0, n_examples, batch_size):
            optimizer.zero_grad(set_to_none=True)
            batch_loss(order[start : start + batch_size]).backward()
            optimizer.step()
    module.eval()


def untrained_student(learner: Learner, n_features: int, n_classes: int, *, seed: int):
    """``(classifier, module, device)``: a seeded :class:`TorchClassifier` and its freshly built
    zoo module on the training device; the classifier is marked fitted by :func:`finish_student`."""
    classifier = seeded_learner(learner, seed)
    if not isinstance(classifier, TorchClassifier):
        raise ValueError("Neural distillation needs a torch student (family 'mlp' or 'cnn').")
    classifier.spec_ = classifier._spec(n_features, n_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build_module(classifier.spec_)
    device = torch.device(best_device() if classifier.device == "auto" else classifier.device)
    return classifier, module.to(device), device


def finish_student(classifier: TorchClassifier, module: nn.Module, n_features: int, n_classes: int):
    """Store the trained module on the CPU with the fitted attributes of a TorchClassifier."""
    classifier.module_ = module.to("cpu").eval()
    classifier.classes_ = np.arange(n_classes)
    classifier.n_features_in_ = n_features
    return classifier


def distil_torch(
    learner: Learner,
    features,
    teacher,
    *,
    loss: str = "kl",
    temperature: float = 2.0,
    hard_label_weight: float = 0.0,
    seed: int,
) -> TorchClassifier:
    """Train a torch student on ``features`` against a teacher.

    Parameters
    ----------
    learner : a torch learner ("mlp", "cnn" or their mappings); its epochs, batch size,
        optimizer and learning rate are used.
    features : (n, n_features)
    teacher : (n, C)
        ``loss="kl"``: the teacher's probabilities; ``loss="l1"``: the teacher's logits.
    loss : {"kl", "l1"}
        Hinton's softened KL (with ``temperature`` and ``hard_label_weight``), or CPFL's mean
        absolute difference of logits.
    seed : int
        Seeds the initialisation and the shuffles.
    """
    if loss not in ("kl", "l1"):
        raise ValueError(f"The distillation loss must be 'kl' or 'l1', not {loss!r}.")
    if not temperature > 0 or not 0.0 <= hard_label_weight <= 1.0:
        raise ValueError(
            "The temperature must be positive and the hard-label weight must lie in [0, 1]."
        )
    features = np.asarray(features, dtype=np.float32)
    teacher = np.asarray(teacher, dtype=np.float64)
    n_examples, n_classes = teacher.shape
    classifier, module, device = untrained_student(learner, features.shape[1], n_classes, seed=seed)
    inputs = torch.from_numpy(features).to(device)
    hard = torch.from_numpy(teacher.argmax(axis=1)).to(device)
    target = teacher if loss == "l1" else soften(teacher, temperature)
    target = torch.from_numpy(target.astype(np.float32)).to(device)

    def batch_loss(batch):
        logits = module(inputs[batch])
        if loss == "l1":
            return (logits - target[batch]).abs().sum(dim=1).mean()
        soft = (
            functional.kl_div(
                functional.log_softmax(logits / temperature, dim=1),
                target[batch],
                reduction="batchmean",
            )
            * temperature**2
        )
        if hard_label_weight == 0:
            return soft
        return (1 - hard_label_weight) * soft + hard_label_weight * functional.cross_entropy(
            logits, hard[batch]
        )

    train_module(
        module,
        n_examples,
        batch_loss,
        epochs=classifier.epochs,
        batch_size=classifier.batch_size,
        optimizer=classifier._optimizer(module),
        rng=np.random.default_rng(seed),
        device=device,
    )
    return finish_student(classifier, module, features.shape[1], n_classes)


def logits_of(classifier: TorchClassifier, features) -> np.ndarray:
    """The zoo network's raw logits ``(n, C)`` (float64), in batches, on the CPU."""
    features = np.asarray(features, dtype=np.float32)
    with torch.no_grad():
        return (
            np.concatenate(
                [
                    classifier.module_(torch.from_numpy(features[start : start + 4096]))
                    .double()
                    .numpy()
                    for start in range(0, len(features), 4096)
                ]
            )
            if len(features)
            else np.empty((0, len(classifier.classes_)))
        )
