"""Metrics the platform measures on a federation's private evaluation split, for global models and members.

The shape is the market's contract (``market.jobs.models.GlobalModel.metrics``): accuracy, balanced
accuracy, macro F1, ROC AUC (binary: of the positive class; multi-class: one-vs-rest macro average; ``None``
when the split holds a single class), the confusion matrix (rows: true class, columns: predicted) and a
reliability diagram of the top-class confidence in equal-width bins.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata

RELIABILITY_BINS = 10


def reliability(
    probabilities: np.ndarray, labels: np.ndarray, *, n_bins: int = RELIABILITY_BINS
) -> dict:
    """Per equal-width bin of top-class confidence: mean confidence, accuracy and count (``None`` when empty)."""
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.digitize(confidence, edges[1:-1], right=True), 0, n_bins - 1)
    counts = np.bincount(bins, minlength=n_bins)
    confidence_sums = np.bincount(bins, weights=confidence, minlength=n_bins)
    correct_sums = np.bincount(bins, weights=correct, minlength=n_bins)
    return {
        "bin_edges": [float(edge) for edge in edges],
        "count": [int(count) for count in counts],
        "confidence": [
            float(total / count) if count else None for total, count in zip(confidence_sums, counts)
        ],
        "accuracy": [
            float(total / count) if count else None for total, count in zip(correct_sums, counts)
        ],
    }


def _binary_auc(positive: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney U / (n₊ n₋), ties counted one half (the area under the ROC curve)."""
    ranks = rankdata(scores)
    n_positive = int(positive.sum())
    n_negative = len(positive) - n_positive
    return float(
        (ranks[positive].sum() - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)
    )


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
    return float(
        np.mean(
            [
                _binary_auc(labels == label, scores[:, column])
                for column, label in enumerate(present)
            ]
        )
    )


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
    confusion = np.bincount(
        labels * n_classes + predicted, minlength=n_classes * n_classes
    ).reshape(n_classes, n_classes)
    true_positives = np.diag(confusion).astype(np.float64)
    support, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    present = support > 0
    f1_denominator = support + predicted_counts
    f1 = np.divide(
        2 * true_positives, f1_denominator, out=np.zeros(n_classes), where=f1_denominator > 0
    )
    return {
        "accuracy": float(true_positives.sum() / len(labels)),
        "balanced_accuracy": float(np.mean(true_positives[present] / support[present])),
        "macro_f1": float(f1.mean()),
        "roc_auc": _roc_auc(probabilities, labels, n_classes),
        "confusion_matrix": confusion.astype(int).tolist(),
        "reliability": reliability(probabilities, labels),
    }


# --- baselines: what a buyer could have without the federation -------------------------------------------------

HEADLINE_METRICS = ("accuracy", "balanced_accuracy", "macro_f1", "roc_auc")


def headline(metrics: dict | None) -> dict:
    """The four headline metrics of a metrics record (``None`` where missing)."""
    return {name: (metrics or {}).get(name) for name in HEADLINE_METRICS}


def majority_class_metrics(class_counts: Sequence[int] | np.ndarray) -> dict | None:
    """Headline metrics of always predicting the class most frequent in the evaluation split.

    The strongest constant guess on these rows: any constant guess has balanced accuracy 1 / (classes present)
    and ROC AUC 0.5 (all scores tie); the most frequent class also has the highest accuracy and macro F1.

    Parameters
    ----------
    class_counts : int array (n_classes,)
        Evaluation rows per true class (the row sums of the confusion matrix). ``None`` when there are no rows.
    """
    counts = np.asarray(class_counts, dtype=np.int64)
    if counts.sum() == 0:
        return None
    n_classes = len(counts)
    labels = np.repeat(np.arange(n_classes), counts)
    constant = np.zeros((len(labels), n_classes))
    constant[:, int(counts.argmax())] = (
        1.0  # ties in the counts go to the lowest class index, like arg-max
    )
    return {
        **headline(classification_metrics(constant, labels, n_classes=n_classes)),
        "class": int(counts.argmax()),
    }


#: What a submission's metrics (and so a silo baseline) were measured with: the silo's own model on all its rows
#: where its submission carries one and the job uses it, else its FedKT students' average (issue 31).
MEASURED_WITH_OWN_MODEL = "own_model"
MEASURED_WITH_STUDENTS = "students"


def member_metrics(probabilities, labels, *, n_classes: int, own_model: bool) -> dict:
    """:func:`classification_metrics` of one member's best probabilities, with ``"measured_with"``: its silo's own
    model (:data:`MEASURED_WITH_OWN_MODEL`) or its students (:data:`MEASURED_WITH_STUDENTS`)."""
    return {
        **classification_metrics(probabilities, labels, n_classes=n_classes),
        "measured_with": MEASURED_WITH_OWN_MODEL if own_model else MEASURED_WITH_STUDENTS,
    }


def silo_baselines(metrics_per_silo: dict[str, list[dict]]) -> dict:
    """The best single silo and the average silo, from the metrics of each silo's submissions.

    A silo with several submissions is represented by its best one (highest balanced accuracy, then accuracy):
    what that silo could sell alone. The best single silo is the silo whose representative scores highest by the
    same order; the average silo is the mean of each headline metric over the silos' representatives (over those
    where the metric is defined).

    Parameters
    ----------
    metrics_per_silo : {silo key: [metrics of each submission]}
        Silos without metrics are skipped.

    Returns
    -------
    {"best_single_silo": headline metrics, "silo" (its key) and "measured_with" (its own model or its students,
    :func:`member_metrics`; absent for metrics recorded before) or None, "average_silo": headline metrics and
    "measured_with" (how many representatives were own models and how many students; absent likewise) or None,
    "n_silos": number of silos measured}
    """

    def order(metrics):
        return (metrics.get("balanced_accuracy") or 0.0, metrics.get("accuracy") or 0.0)

    representatives = {
        silo: max(measured, key=order)
        for silo, measured in sorted(metrics_per_silo.items())
        if measured
    }
    if not representatives:
        return {"best_single_silo": None, "average_silo": None, "n_silos": 0}
    best_silo = max(representatives, key=lambda silo: order(representatives[silo]))

    def average(name):
        values = [
            metrics[name] for metrics in representatives.values() if metrics.get(name) is not None
        ]
        return float(np.mean(values)) if values else None

    measured_with = [metrics.get("measured_with") for metrics in representatives.values()]
    best_measured_with = representatives[best_silo].get("measured_with")
    return {
        "best_single_silo": {
            **headline(representatives[best_silo]),
            "silo": best_silo,
            **({"measured_with": best_measured_with} if best_measured_with else {}),
        },
        "average_silo": {
            **{name: average(name) for name in HEADLINE_METRICS},
            **(
                {
                    "measured_with": {
                        MEASURED_WITH_OWN_MODEL: measured_with.count(MEASURED_WITH_OWN_MODEL),
                        MEASURED_WITH_STUDENTS: measured_with.count(MEASURED_WITH_STUDENTS),
                    }
                }
                if any(measured_with)
                else {}
            ),
        },
        "n_silos": len(representatives),
    }


def baselines(
    *, class_counts: Sequence[int] | np.ndarray, metrics_per_silo: dict[str, list[dict]]
) -> dict:
    """Every baseline of a global model on one evaluation split: ``majority_class`` (see
    :func:`majority_class_metrics`) and the silo baselines of :func:`silo_baselines`."""
    return {
        "majority_class": majority_class_metrics(class_counts),
        **silo_baselines(metrics_per_silo),
    }
