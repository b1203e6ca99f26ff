"""What the operator has without the silos (issue 39): the market's default forest fitted on the fit half of the
federation's evaluation split alone and scored on its report half, the rows every job reports on.

The evaluation split is the operator's own labelled rows, which no silo paid for, so this model is free: a global
model worth buying beats it. Its scores are a baseline beside the majority-class guess and the best and average
silo (:func:`workers.metrics.baselines`); the halves are :func:`workers.algorithms.auto_fusion.evaluation_halves`
of the job's seed, so the report half is read by no fit and no choice here either.
"""

from __future__ import annotations

import numpy as np

from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL
from workers.algorithms.operator_only import operator_only_fit
from workers.metrics import classification_metrics, headline
from workers.modelio.families import feature_view_for

#: The operator-only model: the market's default final model (a forest), the one an operator would fit first.
OPERATOR_ONLY_LEARNER = DEFAULT_FINAL_MODEL
#: The view of the federation's features it reads (ordinal for a tree family).
OPERATOR_ONLY_VIEW = feature_view_for(str(OPERATOR_ONLY_LEARNER["family"]))


def operator_only_baseline(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    fit_rows: np.ndarray,
    report_rows: np.ndarray,
    n_classes: int,
    seed: int,
) -> tuple[dict, np.ndarray]:
    """The headline metrics of :data:`OPERATOR_ONLY_LEARNER` fitted on ``features[fit_rows]`` (in
    :data:`OPERATOR_ONLY_VIEW`) and scored on ``report_rows``, with its family and both row counts, and its
    predicted classes of the report rows (for the paired comparison with the global model); seeded from ``seed``
    (a job's seed may exceed what a learner's random_state takes, so a child seed of it)."""
    features, labels = np.asarray(features), np.asarray(labels, dtype=np.int64)
    model = operator_only_fit(
        OPERATOR_ONLY_LEARNER, features[fit_rows], labels[fit_rows], n_classes=n_classes, seed=seed
    )
    probabilities = model.predict_proba(features[report_rows])
    metrics = classification_metrics(probabilities, labels[report_rows], n_classes=n_classes)
    scores = {
        **headline(metrics),
        "family": OPERATOR_ONLY_LEARNER["family"],
        "fit_rows": int(len(fit_rows)),
        "report_rows": int(len(report_rows)),
    }
    return scores, probabilities.argmax(axis=1)
