"""Metrics the platform measures on a federation's private evaluation split, for global models and members.

The shape is the market's contract (``market.jobs.models.GlobalModel.metrics``): accuracy, balanced
accuracy, macro F1, ROC AUC (binary: of the positive class; multi-class: one-vs-rest macro average; ``None``
when the split holds a single class), the confusion matrix (rows: true class, columns: predicted) and a
reliability diagram of the top-class confidence in equal-width bins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

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


@dataclass(frozen=True)
class MajorityComparison:
    """A model's held-out scores next to always answering the training rows' most frequent class.

    ``margin`` is two standard errors of the paired difference in accuracy (per held-out row: model right minus
    guess right) on ``n_rows`` rows (about a 95 % interval): a model beats the guess only by more than it, in accuracy and in balanced
    accuracy (a constant guess has balanced accuracy ``1 / classes present``), so that a few lucky rows are not
    called a win.
    """

    accuracy: float
    balanced_accuracy: float
    majority_class: int
    majority_accuracy: float
    majority_balanced_accuracy: float
    n_rows: int
    margin: float

    @property
    def beats_majority(self) -> bool:
        return (
            self.accuracy - self.majority_accuracy > self.margin
            and self.balanced_accuracy - self.majority_balanced_accuracy > self.margin
        )

    def as_dict(self) -> dict:
        return {**asdict(self), "beats_majority": self.beats_majority}


def majority_comparison(
    predicted, labels, training_labels, *, n_classes: int
) -> MajorityComparison | None:
    """:class:`MajorityComparison` of predicted classes on held-out rows (None when there are none).

    Parameters
    ----------
    predicted, labels : int arrays (n_rows,)
        The model's classes and the true classes of the held-out rows, in ``0 .. n_classes-1``.
    training_labels : int array
        The classes of the rows the model was fitted on: the guess is their most frequent class, which is what
        the silo could answer without any model.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) == 0:
        return None
    one_hot = np.eye(n_classes)
    model = classification_metrics(
        one_hot[np.asarray(predicted, dtype=np.int64)], labels, n_classes=n_classes
    )
    guess = int(
        np.bincount(np.asarray(training_labels, dtype=np.int64), minlength=n_classes).argmax()
    )
    constant = classification_metrics(
        one_hot[np.full(len(labels), guess)], labels, n_classes=n_classes
    )
    differences = (np.asarray(predicted) == labels).astype(float) - (labels == guess)
    return MajorityComparison(
        accuracy=model["accuracy"],
        balanced_accuracy=model["balanced_accuracy"],
        majority_class=guess,
        majority_accuracy=constant["accuracy"],
        majority_balanced_accuracy=constant["balanced_accuracy"],
        n_rows=int(len(labels)),
        margin=float(2 * differences.std() / np.sqrt(len(labels))),
    )


#: The paired bootstrap of :func:`paired_difference`: resamples of the rows and the interval's coverage.
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
#: What a comparison's ``verdict`` says of the difference (model minus baseline) and its interval.
BEATS, LEVEL, BELOW = "beats", "level", "below"


def _accuracies(correct: np.ndarray, labels: np.ndarray, n_classes: int) -> tuple:
    """Accuracy and balanced accuracy of each row of ``correct`` ``(r, n)`` (rows of one resample each), the
    balanced one over the classes present in that resample (as :func:`classification_metrics`)."""
    accuracy = correct.mean(axis=1)
    recalls = []
    for label in range(n_classes):
        of_class = labels == label
        support = of_class.sum(axis=1)
        recalls.append(
            np.where(support > 0, (correct & of_class).sum(axis=1) / np.maximum(support, 1), np.nan)
        )
    return accuracy, np.nanmean(np.stack(recalls), axis=0)


def paired_difference(predicted, baseline_predicted, labels, *, n_classes: int, seed: int) -> dict:
    """How much better predicted classes are than a baseline's on the same rows, with an uncertainty: for
    ``accuracy`` and ``balanced_accuracy``, the ``difference`` (model minus baseline, 0..1 scale), the
    :data:`BOOTSTRAP_LEVEL` percentile interval ``low``..``high`` of a paired bootstrap
    (:data:`BOOTSTRAP_RESAMPLES` resamples of the rows, each scoring both on the same rows, seeded) and a
    ``verdict``: :data:`BEATS` only when the whole interval is above 0, :data:`BELOW` when it is below, else
    :data:`LEVEL` (a difference inside the interval is no win)."""
    labels = np.asarray(labels, dtype=np.int64)
    rows = np.random.default_rng(seed).integers(0, len(labels), (BOOTSTRAP_RESAMPLES, len(labels)))
    resampled = labels[rows]
    tail = 100 * (1 - BOOTSTRAP_LEVEL) / 2
    names = ("accuracy", "balanced_accuracy")
    scores = {}
    for side, classes in (("model", predicted), ("baseline", baseline_predicted)):
        classes = np.asarray(classes, dtype=np.int64)
        whole = _accuracies((classes == labels)[None], labels[None], n_classes)
        spread = _accuracies(classes[rows] == resampled, resampled, n_classes)
        scores[side] = {name: (whole[i][0], spread[i]) for i, name in enumerate(names)}
    comparison = {}
    for name in names:
        difference = scores["model"][name][0] - scores["baseline"][name][0]
        low, high = np.percentile(
            scores["model"][name][1] - scores["baseline"][name][1], [tail, 100 - tail]
        )
        verdict = BEATS if round(low, 9) > 0 else BELOW if round(high, 9) < 0 else LEVEL
        comparison[name] = {
            "difference": float(difference),
            "low": float(low),
            "high": float(high),
            "verdict": verdict,
        }
    return comparison


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


def silo_order(metrics: dict) -> tuple[float, float]:
    """How submissions and silos are ranked for the silo baselines: balanced accuracy, then accuracy."""
    return (metrics.get("balanced_accuracy") or 0.0, metrics.get("accuracy") or 0.0)


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

    representatives = {
        silo: max(measured, key=silo_order)
        for silo, measured in sorted(metrics_per_silo.items())
        if measured
    }
    if not representatives:
        return {"best_single_silo": None, "average_silo": None, "n_silos": 0}
    best_silo = max(representatives, key=lambda silo: silo_order(representatives[silo]))

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
