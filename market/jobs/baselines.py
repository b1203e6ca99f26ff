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


#: Fewest measured silos for which a viewer who may not see every silo is shown the best and average silo's scores
#: (rounded): with three, a silo knows its own score and solves the average for the third one's exactly.
SILO_SCORES_MIN_SILOS = 4
#: Decimals of those scores (0..1): whole percentage points, so that the silos' scores cannot be solved for exactly.
SILO_SCORE_DECIMALS = 2
SILO_BASELINES = ("best_single_silo", "average_silo")


def _silo_baseline_restricted(baseline: dict, *, model_metrics: dict, n_silos: int) -> dict:
    """A silo baseline as a viewer who may not see every silo sees it: rounded scores from
    :data:`SILO_SCORES_MIN_SILOS` silos on; below, no score at all, only whether the model beats it."""
    scores = {
        name: value for name, value in baseline.items() if name not in ("silo", "measured_with")
    }
    measured_with = (
        {"measured_with": baseline["measured_with"]} if "measured_with" in baseline else {}
    )
    if n_silos >= SILO_SCORES_MIN_SILOS:
        return {
            **{
                name: None if value is None else round(value, SILO_SCORE_DECIMALS)
                for name, value in scores.items()
            },
            "rounded_to": 10**-SILO_SCORE_DECIMALS,
            **measured_with,
        }
    return {
        **dict.fromkeys(scores),
        "model_is_better": {
            name: model_metrics[name] > value
            for name, value in scores.items()
            if value is not None and model_metrics.get(name) is not None
        },
        **measured_with,
        "withheld": f"Single silos' scores are shown only where at least {SILO_SCORES_MIN_SILOS} silos are "
        f"measured ({n_silos} here: each could work out the others' scores); only whether the model beats "
        "this baseline is shown.",
    }


def baselines_visible(
    global_model: GlobalModel, *, every_silo: bool, organisation_id: int | None
) -> dict:
    """The baselines as one viewer may see them (the rule of market.jobs.visibility). A viewer who may see every
    silo sees them all, with the best silo's organisation. Anyone else sees the majority-class guess, and the best
    single and average silo's scores rounded to :data:`SILO_SCORE_DECIMALS` decimals where at least
    :data:`SILO_SCORES_MIN_SILOS` silos were measured, else only whether the model beats them; the best silo's
    organisation only when it is the viewer's own."""
    from market.accounts.models import Organisation

    baselines = global_model_baselines(global_model)
    best = baselines.get("best_single_silo")
    key = (best or {}).get("silo")
    own = organisation_id is not None and key == str(organisation_id)
    if not every_silo:
        n_silos = baselines.get("n_silos") or 0
        baselines = {
            **baselines,
            **{
                name: _silo_baseline_restricted(
                    baselines[name], model_metrics=global_model.metrics or {}, n_silos=n_silos
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
