"""Metrics the platform measures on a federation's private evaluation split, for global models and members.

The shape is the market's contract (``market.jobs.models.GlobalModel.metrics``): accuracy, balanced
accuracy, macro F1, ROC AUC (binary: of the positive class; multi-class: one-vs-rest macro average; ``None``
when the split holds a single class), the confusion matrix (rows: true class, columns: predicted) and a
reliability diagram of the top-class confidence in equal-width bins.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, balanced_accuracy_score, confusion_matrix, f1_score, roc_auc_score

RELIABILITY_BINS = 10


def reliability(probabilities: np.ndarray, labels: np.ndarray, *, n_bins: int = RELIABILITY_BINS) -> dict:
    """Per equal-width bin of top-class confidence: mean confidence, accuracy and count (``None`` when empty)."""
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.digitize(confidence, edges[1:-1], right=True), 0, n_bins - 1)
    result = {"bin_edges": [float(edge) for edge in edges], "confidence": [], "accuracy": [], "count": []}
    for index in range(n_bins):
        inside = bins == index
        count = int(inside.sum())
        result["count"].append(count)
        result["confidence"].append(float(confidence[inside].mean()) if count else None)
        result["accuracy"].append(float(correct[inside].mean()) if count else None)
    return result


def _roc_auc(probabilities: np.ndarray, labels: np.ndarray, n_classes: int) -> float | None:
    present = np.unique(labels)
    if len(present) < 2:
        return None
    if n_classes == 2:
        return float(roc_auc_score(labels, probabilities[:, 1]))
    # one-vs-rest over the classes present in the split; rows renormalised over those classes
    scores = probabilities[:, present]
    scores = scores / np.clip(scores.sum(axis=1, keepdims=True), 1e-12, None)
    if len(present) == 2:
        return float(roc_auc_score(labels == present[1], scores[:, 1]))
    return float(roc_auc_score(labels, scores, multi_class="ovr", average="macro", labels=present))


def classification_metrics(probabilities, labels, *, n_classes: int) -> dict:
    """Every metric of the contract for ``(n_examples, n_classes)`` probabilities against integer labels.

    Parameters
    ----------
    probabilities : array (n_examples, n_classes)
        Class probabilities; the predicted class is the arg-max (ties to the lowest index).
    labels : int array (n_examples,)
        True classes in ``0 .. n_classes-1``.
    n_classes : int
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    predicted = probabilities.argmax(axis=1)
    classes = list(range(n_classes))
    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "balanced_accuracy": float(balanced_accuracy_score(labels, predicted)),
        "macro_f1": float(f1_score(labels, predicted, labels=classes, average="macro", zero_division=0)),
        "roc_auc": _roc_auc(probabilities, labels, n_classes),
        "confusion_matrix": confusion_matrix(labels, predicted, labels=classes).astype(int).tolist(),
        "reliability": reliability(probabilities, labels),
    }
