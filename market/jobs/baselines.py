"""Baselines of a global model: measured when the job saves it, derived the same way for models saved before.

The evaluation step (market.jobs.runner.finalize) stores them on ``GlobalModel.baselines``; a model made before
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
        if not metrics:
            continue
        key = organisation_of.get(int(submission_id))
        grouped.setdefault(
            str(key) if key is not None else f"submission-{submission_id}", []
        ).append(metrics)
    return grouped


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


def baselines_visible(
    global_model: GlobalModel, *, every_silo: bool, organisation_id: int | None
) -> dict:
    """The baselines as one viewer may see them (the rule of market.jobs.visibility): the majority-class guess, the
    average silo and the best single silo's scores for everyone who may see the model; which organisation the best
    silo is ("silo" and "organisation") only to a viewer who may see every silo, or to that silo itself."""
    from market.accounts.models import Organisation

    baselines = global_model_baselines(global_model)
    best = baselines.get("best_single_silo")
    if best is None:
        return baselines
    key = best.get("silo")
    if every_silo or (organisation_id is not None and key == str(organisation_id)):
        organisation = (
            Organisation.objects.filter(id=int(key)).first() if key and key.isdigit() else None
        )
        return {
            **baselines,
            "best_single_silo": {
                **best,
                "organisation": organisation.name if organisation else None,
            },
        }
    return {
        **baselines,
        "best_single_silo": {name: value for name, value in best.items() if name != "silo"},
    }
