"""What the operator has without the silos, in the tabular suite (issue 39, item 4): the operator-only baseline,
its learning curve, and the L0 default against it and the best silo with a paired-bootstrap interval.

- The operator-only baseline (:func:`operator_only_scores`) is what every job records
  (:func:`workers.algorithms.operator_baseline.operator_only_baseline`): the market's default forest
  (:data:`~workers.algorithms.operator_baseline.OPERATOR_ONLY_LEARNER`) fitted on the fit half of the evaluation
  split (:func:`~workers.algorithms.auto_fusion.evaluation_halves` of the setting's seed), scored where every
  other model of the suite is scored, and on the report half as its job would report it.
- The learning curve (:func:`operator_learning_curve`): the same forest fitted on
  :data:`LEARNING_CURVE_ROWS` operator rows, drawn from rows no silo holds that are not scored: first the whole
  evaluation split in a seeded random order, then, where it has fewer rows than a point asks for, the public rows
  in a seeded random order with the labels the public data does not carry (what the operator would have if it
  labelled that many of its own rows). The draws are nested (the 100 rows are among the 250). A point that asks
  for more rows than the evaluation split and the public rows hold together is capped at all of them, and its
  entry says so (``"capped"``, ``"asked"`` and ``"rows"``).
- The comparisons (:func:`default_comparisons`): the L0 default's accuracy and balanced accuracy minus the
  operator-only model's and the best silo's, on the scored rows, each with a paired-bootstrap 95 % interval
  (:func:`workers.metrics.paired_difference`, the one the market's gate and card use: 1,000 resamples seeded by
  the setting's seed): a loss inside the interval is a tie.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from workers.algorithms.auto_fusion import evaluation_halves
from workers.algorithms.operator_baseline import OPERATOR_ONLY_LEARNER, OPERATOR_ONLY_VIEW
from workers.algorithms.operator_only import operator_only_fit
from workers.metrics import paired_difference

#: The operator rows of the learning curve's points.
LEARNING_CURVE_ROWS = (100, 250, 500, 1000)


def operator_only_predictions(
    views, *, n_classes: int, seed: int
) -> tuple[np.ndarray, np.ndarray, dict]:
    """The operator-only baseline's predicted classes of the scored rows and of the report half, and its facts
    (the rows of each half, its family). ``views``: the suite's :class:`~workers.reproduce.suite.Views`; the suite
    scores the predictions as it scores every model."""
    features = views.rows("evaluation", OPERATOR_ONLY_VIEW)
    labels = views.labels("evaluation")
    fit_rows, report_rows = evaluation_halves(labels, seed=seed)
    model = operator_only_fit(
        OPERATOR_ONLY_LEARNER, features[fit_rows], labels[fit_rows], n_classes=n_classes, seed=seed
    )
    facts = {
        "fit_rows": int(len(fit_rows)),
        "report_rows": report_rows,
        "family": OPERATOR_ONLY_LEARNER["family"],
    }
    return (
        model.predict(views.rows("scored", OPERATOR_ONLY_VIEW)),
        model.predict(features[report_rows]),
        facts,
    )


def learning_curve_pool(n_evaluation: int, n_public: int, *, seed: int) -> list[tuple[str, int]]:
    """The learning curve's rows in the order they are drawn: ``("evaluation", index)`` for every evaluation
    row in a seeded random order, then ``("public", index)`` for every public row likewise."""
    generator = np.random.default_rng(seed)
    return [("evaluation", int(index)) for index in generator.permutation(n_evaluation)] + [
        ("public", int(index)) for index in generator.permutation(n_public)
    ]


def operator_learning_curve(
    views, *, n_classes: int, seed: int
) -> list[tuple[dict, np.ndarray | None]]:
    """One point per :data:`LEARNING_CURVE_ROWS`: ``(facts, predicted)``, the operator-only forest fitted on that many
    operator rows (the module docstring's draw) and its predicted classes of the scored rows, with how many rows
    came from the evaluation split and how many are public rows labelled; a point that asks for more rows than
    there are is capped: fitted on all of them, ``"capped": True`` and ``"rows"`` below ``"asked"``."""
    parts = {part: views.rows(part, OPERATOR_ONLY_VIEW) for part in ("evaluation", "public")}
    labels = {part: views.labels(part) for part in parts}
    pool = learning_curve_pool(len(labels["evaluation"]), len(labels["public"]), seed=seed)
    scored = views.rows("scored", OPERATOR_ONLY_VIEW)
    points: list[tuple[dict, np.ndarray]] = []
    for asked in LEARNING_CURVE_ROWS:
        drawn = pool[:asked]
        model = operator_only_fit(
            OPERATOR_ONLY_LEARNER,
            np.stack([parts[part][index] for part, index in drawn]),
            np.array([labels[part][index] for part, index in drawn]),
            n_classes=n_classes,
            seed=seed,
        )
        from_evaluation = sum(part == "evaluation" for part, _ in drawn)
        facts = {
            "asked": asked,
            "rows": len(drawn),
            "capped": len(drawn) < asked,
            "evaluation_rows": from_evaluation,
            "public_rows_labelled": len(drawn) - from_evaluation,
        }
        points.append((facts, model.predict(scored)))
    return points


def default_comparisons(
    truth, default_predicted, references: Mapping[str, np.ndarray], *, n_classes: int, seed: int
) -> dict:
    """``{reference: {metric: {"difference", "low", "high", "verdict"}}}``: the default's accuracy and balanced
    accuracy minus each reference's (``references``: name → predicted classes of the same scored rows), with the
    paired-bootstrap interval of :func:`workers.metrics.paired_difference` (the market's own comparison)."""
    return {
        name: paired_difference(default_predicted, predicted, truth, n_classes=n_classes, seed=seed)
        for name, predicted in references.items()
    }
