"""Metrics the platform measures on a federation's private evaluation split, for global models and members.

The shape is the market's contract (``market.jobs.models.GlobalModel.metrics``): accuracy, balanced
accuracy, macro F1, ROC AUC (binary: of the positive class; multi-class: one-vs-rest macro average; ``None``
when the split holds a single class), the confusion matrix (rows: true class, columns: predicted) and a
reliability diagram of the top-class confidence in equal-width bins.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

RELIABILITY_BINS = 10


def reliability(probabilities: np.ndarray, labels: np.ndarray, *, n_bins: int = RELIABILITY_BINS) -> dict:
    """Per equal-width bin of top-class confidence: mean confidence, accuracy and count (``None`` when empty)."""
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.digitize(confidence, edges[1:-1], right=True), 0, n_bins - 1)
    counts = np.bincount(bins, minlength=n_bins)
    confidence_sums = np.bincount(bins, weights=confidence, minlength=n_bins)
    correct_sums = np.bincount(bins, weights=correct, minlength=n_bins)
    return {"bin_edges": [float(edge) for edge in edges], "count": [int(count) for count in counts],
            "confidence": [float(total / count) if count else None for total, count in zip(confidence_sums, counts)],
            "accuracy": [float(total / count) if count else None for total, count in zip(correct_sums, counts)]}


def _binary_auc(positive: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney U / (n₊ n₋), ties counted one half (the area under the ROC curve)."""
    ranks = rankdata(scores)
    n_positive = int(positive.sum())
    n_negative = len(positive) - n_positive
    return float((ranks[positive].sum() - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative))


def _roc_auc(probabilities: np.ndarray, labels: np.ndarray, n_classes: int) -> float | None:
    present = np.unique(labels)
    if len(present) < 2:
        return None
    if n_classes == 2:
        return _binary_auc(labels == 1, probabilities[:, 1])
    # one-vs-rest over the classes present in the split, scores renormalised over those classes, macro average
    scores = probabilities[:, present]
    if len(present) < n_classes:
        scores = scores / np.clip(scores.sum(axis=1, keepdims=True), 1e-12, None)
    if len(present) == 2:
        return _binary_auc(labels == present[1], scores[:, 1])
    return float(np.mean([_binary_auc(labels == label, scores[:, column]) for column, label in enumerate(present)]))


def classification_metrics(probabilities, labels, *, n_classes: int) -> dict:
    """Every metric of the contract for ``(n_examples, n_classes)`` probabilities against integer labels.

    Computed from the confusion matrix with numpy (the same values as scikit-learn's ``accuracy_score``,
    ``balanced_accuracy_score``, ``f1_score(average="macro", zero_division=0)`` over all K classes and
    ``roc_auc_score``, at a fraction of the cost: a job measures every member).

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
    confusion = np.bincount(labels * n_classes + predicted, minlength=n_classes * n_classes).reshape(
        n_classes, n_classes)
    true_positives = np.diag(confusion).astype(np.float64)
    support, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    present = support > 0
    f1_denominator = support + predicted_counts
    f1 = np.divide(2 * true_positives, f1_denominator, out=np.zeros(n_classes), where=f1_denominator > 0)
    return {
        "accuracy": float(true_positives.sum() / len(labels)),
        "balanced_accuracy": float(np.mean(true_positives[present] / support[present])),
        "macro_f1": float(f1.mean()),
        "roc_auc": _roc_auc(probabilities, labels, n_classes),
        "confusion_matrix": confusion.astype(int).tolist(),
        "reliability": reliability(probabilities, labels),
    }
