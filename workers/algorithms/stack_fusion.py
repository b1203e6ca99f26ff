"""The "stack" job kind (issue 31): the members' probabilities combined by an aggregator learnt on half of the
federation's labelled evaluation split, distilled into one model (:mod:`workers.algorithms.stacking`).

- ``aggregator`` (:data:`workers.algorithms.stacking.AGGREGATOR_CHOICES`, default
  :data:`workers.algorithms.stacking.DEFAULT_AGGREGATOR`):
  ``logistic`` (a logistic regression on the members' log-probabilities, with per-class bias), ``weights`` (one
  non-negative weight per member) or ``auto`` (the better of the two out of fold on the fit half).
- ``final_model`` (learner, default FedKT's :data:`workers.algorithms.fedkt_fusion.DEFAULT_FINAL_MODEL`): the global
  model, fitted on the queried public rows labelled by the aggregate plus the fit half with its true labels.
- ``query_fraction`` / ``query_count`` (default all rows): the public rows it is fitted on (a seeded draw).
- signal: the ensemble kind's (:meth:`workers.algorithms.ensemble_fusion.EnsembleFusion.member_signal`, inherited: a
  member's best class probabilities of the public rows). ``fuse`` needs each member's own signal, not only their
  sum: the runner passes them as :attr:`workers.algorithms.auto_fusion.EvaluationRows.member_signals`.

Cross-fitting: ``fuse`` fits on the first of :func:`workers.algorithms.auto_fusion.evaluation_halves` of the
evaluation split (drawn with the job's seed) and never reads the other, on which the job reports every metric
(``Fusion.details["stack"]`` says so: :func:`workers.algorithms.auto_fusion.fitted_on_evaluation`). A stack that
cannot beat the constant model out of fold on its fit half is refused (:func:`workers.algorithms.stacking.
constant_refusal`).

Privacy: the aggregator is fitted on the members' outputs without noise, so the kind runs at L0 (and on L2
submissions, whose noise the silos added before uploading) and takes no server noise (``accepts_noise`` is
False; the market refuses it at L1): what the stack releases about a silo is not accounted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.ensemble_fusion import EnsembleFusion
from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL, FINAL_MODEL_FAMILIES
from workers.algorithms.registry import Fusion, Member, register
from workers.algorithms.schema import (
    QUERY_HELP,
    WorkEstimate,
    learner,
    learner_work,
    one_of,
    prediction_work,
    query_rows,
    query_setting,
    unknown_keys_refused,
)
from workers.algorithms.stacking import (
    AGGREGATOR_CHOICES,
    DEFAULT_AGGREGATOR,
    aggregator_fits,
    stacked_fit,
)

STACK_REFUSED_AT_L1 = (
    "A stacked fusion cannot run at L1: its aggregator is fitted on the members' predictions without noise, "
    "which no privacy accountant here covers; run it at L0, or on L2 submissions."
)


class StackedFusion(EnsembleFusion):
    """Members' probabilities stacked by an aggregator fitted on half of the evaluation split, distilled into one
    model (module docstring). The member signal is the ensemble kind's, inherited."""

    name = "stack"
    label = "Stacked fusion"
    keys: tuple[str, ...] = ("aggregator", "final_model", "query_fraction", "query_count")
    choices = {"aggregator": AGGREGATOR_CHOICES}
    help = {
        "aggregator": (
            "How the members' probabilities are combined, learnt on half of the evaluation split (the metrics are "
            "on the other half): "
            + " | ".join(AGGREGATOR_CHOICES)
            + f" (default {DEFAULT_AGGREGATOR}; logistic "
            "is a logistic regression on their log-probabilities with a bias per class, weights one weight per "
            "member, auto the better of the two cross-fitted on that half). L0 and L2 only."
        ),
        "final_model": 'The global model\'s learner, fitted on the public rows labelled by the aggregate: {"family": '
        "one of " + ", ".join(FINAL_MODEL_FAMILIES) + ", ...hyperparameters}.",
        "query_fraction": QUERY_HELP,
        "query_count": QUERY_HELP,
    }

    def validate(self, params: Mapping) -> dict:
        params = dict(params or {})
        unknown_keys_refused(params, known=self.keys, what="a stack job")
        return {
            "aggregator": one_of(
                params.get("aggregator", DEFAULT_AGGREGATOR),
                name="aggregator",
                choices=AGGREGATOR_CHOICES,
            ),
            "final_model": learner(
                params.get("final_model", DEFAULT_FINAL_MODEL),
                name="final_model",
                families=FINAL_MODEL_FAMILIES,
            ),
            **query_setting(params),
        }

    @staticmethod
    def noise_refusal(settings: Mapping) -> str | None:
        """:data:`STACK_REFUSED_AT_L1`: the kind never takes server noise."""
        return STACK_REFUSED_AT_L1

    @staticmethod
    def reads_evaluation(settings: Mapping) -> bool:
        """True: the aggregator is fitted on half of the evaluation split."""
        return True

    @staticmethod
    def report_sentence(details: Mapping, *, report_rows: int) -> str:
        stack = details["stack"]
        return (
            f"Stacked by {stack['aggregator']}, fitted on {stack['fit_rows']} evaluation rows; metrics "
            f"below are on the other {stack['report_rows']}."
        )

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int) -> WorkEstimate:
        rows = min(query_rows(settings, n_public=n_public), n_public)
        return WorkEstimate(
            rows,
            prediction_work(n_public=n_public, n_member_models=n_member_models)
            + learner_work(settings["final_model"], n_rows=rows),
            aggregator_fits=aggregator_fits(settings["aggregator"]),
        )

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        """Every member: the aggregator weighs them itself."""
        return list(range(len(members)))

    def fuse(
        self,
        signal_sum,
        public_features,
        *,
        members: Sequence[Member],
        n_classes: int,
        params: Mapping,
        noise=None,
        seed: int,
        evaluation: EvaluationRows | None = None,
    ) -> Fusion:
        settings = self.validate(params)
        self.noise_refused(noise)
        if evaluation is None:
            raise ValueError(
                "A stacked fusion is fitted on the federation's evaluation split, which was not given."
            )
        member_public = member_signals_of(evaluation, members=members, signal_sum=signal_sum)
        fit_rows, report_rows = evaluation_halves(evaluation.labels, seed=seed)
        stacked = stacked_fit(
            member_public,
            public_features,
            member_evaluation=evaluation.member_probabilities,
            evaluation_features=evaluation.features,
            evaluation_labels=evaluation.labels,
            fit_rows=fit_rows,
            settings=settings,
            n_classes=n_classes,
            seed=seed,
        )
        details = {
            "n_members": len(members),
            "stack": {**stacked.details, "report_rows": int(len(report_rows))},
        }
        return Fusion(stacked.model, stacked.public_labels, stacked.trained, None, details)


def member_signals_of(
    evaluation: EvaluationRows, *, members: Sequence[Member], signal_sum
) -> np.ndarray:
    """The members' own public-row signals ``(m, n_public, width)`` out of ``evaluation``; a ValueError naming what
    is missing (a stacked fusion reads every member's probabilities and signal, not only their sum)."""
    n_evaluation = len(evaluation.labels)
    if np.asarray(evaluation.member_probabilities).shape[:2] != (len(members), n_evaluation):
        raise ValueError(
            "A stacked fusion needs every member's probabilities of every evaluation row."
        )
    signals = evaluation.member_signals
    if signals is None or np.asarray(signals).shape[:2] != (
        len(members),
        len(np.asarray(signal_sum)),
    ):
        raise ValueError(
            "A stacked fusion needs every member's own signal of the public rows (EvaluationRows.member_signals)."
        )
    return np.asarray(signals, dtype=np.float64)


STACK = register(StackedFusion())
