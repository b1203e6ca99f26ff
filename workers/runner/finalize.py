"""The chord's callback: claim the fusion, run its steps (:mod:`.fusing`: fuse, then export and evaluate), and
record the global model: contributions, the privacy report, the lineage and the baselines, saved with its files in
one transaction with the budget charge."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from market.jobs.baselines import baselines_measure, best_silo_submission
from market.jobs.lifecycle import (
    JobSuperseded,
    job_end_if_cancelled,
    job_fail,
    job_fusion_claim,
    job_fusion_release,
    job_stage_set,
    job_succeed,
)
from market.jobs.selectors import job_for_run, job_members, party_noise_used, server_noise_used
from market.jobs.services import job_log, job_release
from market.storage import arrays_from_npz_cached
from workers.algorithms import algorithm_get
from workers.algorithms.registry import agreement_counts
from workers.algorithms.transfer import child_seeds
from workers.features import view_width
from workers.metrics import (
    BOOTSTRAP_LEVEL,
    BOOTSTRAP_RESAMPLES,
    member_metrics,
    paired_difference,
)
from workers.privacy.reports import JobPrivacyReport
from workers.runner.fusing import (
    EvaluatedModel,
    FusedJob,
    evaluation_report_rows,
    job_chunk_signals,
    job_evaluate,
    job_fuse,
    job_operator_only_baseline,
)
from workers.runner.leases import code_version, lease_kept, worker_id
from workers.runner.lifecycle import JobInputError, failing_on_unexpected, logger
from workers.runner.valuing import (
    NO_SILO_VALUED,
    contribution_weights_unused,
    job_contribution_values,
)

# Row types for annotations only: rows reach the runner through market.jobs' selectors and services.
if TYPE_CHECKING:
    from market.jobs.models import Job

CONTRIBUTION_RULE = (
    "Each silo's weight is the number of public examples the global model was trained on where its "
    "members' signal (FedKT: consistent votes) agreed with the fused label, summed over its "
    "submissions and normalised so that the weights add up to 1 (equal weights if no member agreed)."
)


def job_finalize_release(*, job_id: int) -> None:
    job_fusion_release(job_id=job_id, worker=worker_id())


@failing_on_unexpected("fusing")
def job_finalize(*, job_id: int) -> None:
    """Sum the chunks' signals, add L1 noise once, fuse, evaluate the exported model, save the global model."""
    if not job_fusion_claim(job_id=job_id, worker=worker_id()):
        return
    job = job_for_run(job_id=job_id)
    try:
        with lease_kept(job_id=job_id):
            job_stage_set(job_id=job_id, stage="fusing")
            fused = job_fuse(job)
            if job_end_if_cancelled(job_id=job_id) or fused is None:
                return
            job_stage_set(job_id=job_id, stage="evaluating")
            evaluated = job_evaluate(job, fused)
            if job_end_if_cancelled(job_id=job_id):
                return
            job_stage_set(job_id=job_id, stage="saving")
            job_release(job=job, lines=evaluated.report_lines)
            _save(job, fused, evaluated)
    except JobInputError as error:
        job_fail(job_id=job_id, reason=str(error), step_error=True)


def _contributions(job: Job, fused: FusedJob) -> dict:
    fusion = fused.fusion
    trained = np.asarray(fusion.trained, dtype=bool)
    labels = np.asarray(fusion.labels)
    per_organisation: dict[str, float] = {}
    for chunk in job_chunk_signals(job):
        for member_id, signal in zip(chunk.member_ids, chunk.member_signals):
            signal = signal[
                :, : job.federation.n_classes
            ]  # auto: its first block, the consistent votes
            organisation = str(fused.submissions[int(member_id)].organisation_id)
            count = agreement_counts(signal[trained], labels[trained]) if trained.any() else 0
            per_organisation[organisation] = per_organisation.get(organisation, 0) + count
    total = sum(per_organisation.values())
    if total == 0:
        return {organisation: 1 / len(per_organisation) for organisation in per_organisation}
    return {organisation: count / total for organisation, count in sorted(per_organisation.items())}


def _privacy_report(job: Job, fused: FusedJob) -> JobPrivacyReport:
    report = _level_privacy_report(job, fused)
    notes = algorithm_get(job.kind).privacy_notes(
        fused.fusion.details
    )  # e.g. the operator's rows cost no ε
    return replace(report, notes=notes) if notes else report


def _level_privacy_report(job: Job, fused: FusedJob) -> JobPrivacyReport:
    if server_noise_used(privacy_level=job.privacy_level):
        analysis = fused.fusion.privacy
        if analysis is None:
            raise JobInputError(
                "The engine returned no privacy analysis for an L1 job; the job cannot be charged."
            )
        return JobPrivacyReport(
            level=job.privacy_level,
            data_independent=analysis.data_independent,
            data_dependent=analysis.data_dependent,
        )
    if party_noise_used(privacy_level=job.privacy_level):
        return JobPrivacyReport(
            level=job.privacy_level,
            submissions={str(i): fused.submissions[i].privacy_report for i in fused.submission_ids},
        )
    return JobPrivacyReport(level=job.privacy_level)


def _lineage(job: Job, fused: FusedJob, evaluated: EvaluatedModel) -> dict:
    return {
        "job": job.id,
        "kind": job.kind,
        "privacy_level": job.privacy_level,
        "submissions": list(fused.submission_ids),
        "submission_sha256": {
            str(i): fused.submissions[i].content_sha256 for i in fused.submission_ids
        },
        "public_dataset": {
            "id": job.public_dataset_id,
            "content_sha256": job.public_dataset.content_sha256,
            "features_sha256": job.public_dataset.features_sha256,
        },
        "evaluation_split": job.evaluation_split_id,
        "code_version": code_version(),
        "seed": job.seed,
        "parameters": job.parameters,
        "dp_noise": "unseeded (OpenDP, cryptographically secure)"
        if server_noise_used(privacy_level=job.privacy_level)
        else None,
        "fusion": _json_ready(fused.fusion.details),
        "verification": evaluated.verification,
        "feature_view": fused.feature_view,
    }


def _json_ready(value):
    if isinstance(value, dict):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 1000 else f"<array of shape {value.shape}>"
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _baselines(
    job: Job,
    fused: FusedJob,
    evaluated: EvaluatedModel,
    member_report: MemberReport,
) -> dict:
    """The majority-class guess, the best and average silo (market.jobs.baselines) and the operator-only model
    (:func:`workers.runner.fusing.job_operator_only_baseline`), all on the rows the global model reports on; the
    guess, the best silo and the operator-only model each with the global model's paired comparison to it
    (``comparison``: :func:`workers.metrics.paired_difference`, issue 39)."""
    confusion = evaluated.metrics["confusion_matrix"]
    organisation_of = {
        submission_id: submission.organisation_id
        for submission_id, submission in fused.submissions.items()
    }
    measured = baselines_measure(
        class_counts=[sum(row) for row in confusion],
        submission_metrics=member_report.metrics,
        organisation_of=organisation_of,
    )
    operator_only = job_operator_only_baseline(job)
    measured["operator_only"] = operator_only[0] if operator_only else None
    baseline_predictions = {
        "operator_only": operator_only[1] if operator_only else None,
        "majority_class": np.full(len(member_report.labels), measured["majority_class"]["class"])
        if measured["majority_class"]
        else None,
        "best_single_silo": member_report.predictions[
            best_silo_submission(
                measured["best_single_silo"]["silo"],
                member_report.metrics,
                organisation_of=organisation_of,
            )
        ]
        if measured["best_single_silo"]
        else None,
    }
    comparison_seed = child_seeds(job.seed, 2)[1]
    for name, predictions in baseline_predictions.items():
        if predictions is not None:
            measured[name] = {
                **measured[name],
                "comparison": paired_difference(
                    evaluated.report_predictions,
                    predictions,
                    member_report.labels,
                    n_classes=job.federation.n_classes,
                    seed=comparison_seed,
                ),
            }
    measured["comparison_method"] = COMPARISON_METHOD
    _baselines_logged(job, measured)
    return measured


def _baselines_logged(job: Job, measured: dict) -> None:
    # The log is read by every participant: it names no silo's own score (the job page decides who sees those).
    majority, operator_only_scores = measured["majority_class"], measured["operator_only"]
    job_log(
        job_id=job.id,
        message=f"Baselines measured over {measured['n_silos']} silo(s)"
        + (
            f"; the majority-class guess scores {majority['balanced_accuracy']:.4f} balanced accuracy"
            if majority
            else ""
        )
        + (
            f"; the operator's rows alone ({operator_only_scores['family']} on "
            f"{operator_only_scores['fit_rows']} rows) {operator_only_scores['balanced_accuracy']:.4f}"
            if operator_only_scores
            else ""
        )
        + ".",
    )


#: How the global model's comparisons with its baselines are made (stored beside them).
COMPARISON_METHOD = {
    "method": "paired bootstrap over the report rows (model minus baseline, both scored on each resample)",
    "resamples": BOOTSTRAP_RESAMPLES,
    "level": BOOTSTRAP_LEVEL,
}


@dataclass(frozen=True)
class MemberReport:
    """Every member's ``metrics`` and predicted classes (``predictions``) of the report rows, by submission id
    (a string), and those rows' true ``labels``."""

    metrics: dict[str, dict]
    predictions: dict[str, np.ndarray]
    labels: np.ndarray


def _member_report(job: Job, fused: FusedJob, rows: np.ndarray) -> MemberReport:
    labels = arrays_from_npz_cached(job.evaluation_split.data_file)["labels"][rows]
    own_model = {
        int(member.key): member.own_model
        for member in job_members(
            submissions=list(fused.submissions.values()), privacy_level=job.privacy_level
        )
    }
    metrics, predictions = {}, {}
    for chunk in job_chunk_signals(job):
        for member_id, probabilities in zip(chunk.member_ids, chunk.evaluation_probabilities):
            key = str(int(member_id))
            metrics[key] = member_metrics(
                probabilities[rows],
                labels,
                n_classes=job.federation.n_classes,
                own_model=own_model.get(int(member_id), False),
            )
            predictions[key] = probabilities[rows].argmax(axis=1)
    return MemberReport(metrics=metrics, predictions=predictions, labels=labels)


def _save(job: Job, fused: FusedJob, evaluated: EvaluatedModel) -> None:
    report = evaluation_report_rows(
        job, arrays_from_npz_cached(job.evaluation_split.data_file)["labels"]
    )
    # the baselines are measured on the rows the global model is reported on
    member_report = _member_report(job, fused, report)
    privacy_report = _privacy_report(job, fused)
    baselines = _baselines(job, fused, evaluated, member_report)
    # a model auto fitted on the operator's rows alone credits no silo (workers.runner.valuing)
    unused = contribution_weights_unused(fused)
    fields = {
        "federation": job.federation,
        "baselines": baselines,
        "model_family": evaluated.family,
        "n_features": view_width(job.public_dataset.feature_spec, fused.feature_view),
        "n_classes": job.federation.n_classes,
        "metrics": evaluated.metrics,
        "submission_metrics": member_report.metrics,
        "privacy_report": privacy_report.as_dict(),
        "lineage": _lineage(job, fused, evaluated),
        "contribution_weights": _contributions(job, fused) if unused is None else unused,
        "contribution_rule": CONTRIBUTION_RULE if unused is None else NO_SILO_VALUED,
        # issue 28: each silo's value of the job's own vote or average, on the same report rows
        "contribution_values": job_contribution_values(job, fused, report),
    }
    job_succeed(
        job=job,
        worker=worker_id(),
        fields=fields,
        files=evaluated.files,
        privacy_report=privacy_report,
    )


def job_finalize_safely(*, job_id: int) -> None:
    try:
        job_finalize(job_id=job_id)
    except JobSuperseded:
        if job_end_if_cancelled(job_id=job_id):
            return
        logger.info("Job %s was taken over by another worker; this result is dropped.", job_id)
