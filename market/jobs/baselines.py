"""Baselines of a global model: measured when the job saves it, derived the same way for models saved before.

The evaluation step (workers.runner.finalize) stores them on ``GlobalModel.baselines``; a model made before
baselines existed gets them from its own records: the class counts are the row sums of its confusion matrix, and
its submissions' metrics are grouped by the organisation that uploaded each submission.
"""

from __future__ import annotations

from market.jobs.models import GlobalModel
from market.submissions.models import Submission


def metrics_per_silo(
    submission_metrics: dict, *, organisation_of: dict[int, int]
) -> dict[str, list[dict]]:
    """{"<organisation id>": [metrics of each of its submissions]}; a submission whose organisation is unknown
    (deleted) counts as a silo of its own."""
    grouped: dict[str, list[dict]] = {}
    for submission_id, metrics in (submission_metrics or {}).items():
        if metrics:
            grouped.setdefault(silo_key(submission_id, organisation_of), []).append(metrics)
    return grouped


def silo_key(submission_id, organisation_of: dict[int, int]) -> str:
    """The silo a submission's metrics count for (:func:`metrics_per_silo`)."""
    key = organisation_of.get(int(submission_id))
    return str(key) if key is not None else f"submission-{submission_id}"


def best_silo_submission(
    best_silo: str, submission_metrics: dict, *, organisation_of: dict[int, int]
) -> str:
    """The submission whose metrics are the best single silo's (``best_silo``: its key): the silo's best one by
    the order of workers.metrics.silo_baselines, the first of equals."""
    from workers.metrics import silo_order

    return max(
        (
            submission_id
            for submission_id, metrics in submission_metrics.items()
            if metrics and silo_key(submission_id, organisation_of) == best_silo
        ),
        key=lambda submission_id: silo_order(submission_metrics[submission_id]),
    )


def baselines_measure(
    *, class_counts, submission_metrics: dict, organisation_of: dict[int, int]
) -> dict:
    """Baselines from the evaluation split's class counts and each submission's metrics on it."""
    from workers.metrics import baselines  # scipy stays out of web processes until a card needs it

    return baselines(
        class_counts=class_counts,
        metrics_per_silo=metrics_per_silo(submission_metrics, organisation_of=organisation_of),
    )


def global_model_baselines(global_model: GlobalModel) -> dict:
    """The stored baselines, or for an older model the same measurement from its confusion matrix and its
    submissions' metrics (the majority class is None when the model has no confusion matrix)."""
    if global_model.baselines:
        return global_model.baselines
    confusion = (global_model.metrics or {}).get("confusion_matrix") or []
    submission_ids = [int(key) for key in (global_model.submission_metrics or {})]
    organisation_of = dict(
        Submission.objects.filter(id__in=submission_ids).values_list("id", "organisation_id")
    )
    return baselines_measure(
        class_counts=[sum(row) for row in confusion],
        submission_metrics=global_model.submission_metrics,
        organisation_of=organisation_of,
    )


SILO_BASELINES = ("best_single_silo", "average_silo")
#: Why a viewer who may not see every silo sees no silo baseline's score (issue 38 item 4).
SILO_SCORES_WITHHELD = (
    "Single silos' scores, and the best and average of them, are shown only to the federation's operators (and "
    "to everyone where the federation publishes contributions): jobs over different sets of silos would let a "
    "reader work out one silo's score from them, rounded or not. Only whether the model beats this baseline is "
    "shown."
)


def _silo_baseline_restricted(baseline: dict, *, model_metrics: dict) -> dict:
    """A silo baseline as a viewer who may not see every silo sees it: no score, only whether the model beats it
    (``model_is_better``, per metric, and the verdict of its paired comparison) and how it was measured."""
    scores = {
        name: value
        for name, value in baseline.items()
        if name not in ("silo", "measured_with", "comparison")
    }
    comparison = baseline.get("comparison")
    return {
        **dict.fromkeys(scores),
        **(
            {
                "comparison": {
                    metric: {"verdict": measured["verdict"]}
                    for metric, measured in comparison.items()
                }
            }
            if comparison
            else {}
        ),
        "model_is_better": {
            name: model_metrics[name] > value
            for name, value in scores.items()
            if value is not None and model_metrics.get(name) is not None
        },
        **({"measured_with": baseline["measured_with"]} if "measured_with" in baseline else {}),
        "withheld": SILO_SCORES_WITHHELD,
    }


def baselines_visible(
    global_model: GlobalModel, *, every_silo: bool, organisation_id: int | None
) -> dict:
    """The baselines as one viewer may see them (the rule of market.jobs.visibility). A viewer who may see every
    silo sees them all, with the best silo's organisation. Anyone else sees the majority-class guess and the
    operator-only model, and of the best single and average silo only whether the model beats them
    (:data:`SILO_SCORES_WITHHELD`); the best silo's organisation only when it is the viewer's own."""
    from market.accounts.models import Organisation

    baselines = global_model_baselines(global_model)
    best = baselines.get("best_single_silo")
    key = (best or {}).get("silo")
    own = organisation_id is not None and key == str(organisation_id)
    if not every_silo:
        baselines = {
            **baselines,
            **{
                name: _silo_baseline_restricted(
                    baselines[name], model_metrics=global_model.metrics or {}
                )
                for name in SILO_BASELINES
                if baselines.get(name) is not None
            },
        }
    if best is None or not (every_silo or own):
        return baselines
    organisation = (
        Organisation.objects.filter(id=int(key)).first() if key and key.isdigit() else None
    )
    return {
        **baselines,
        "best_single_silo": {
            **baselines["best_single_silo"],
            "organisation": organisation.name if organisation else None,
        },
    }
