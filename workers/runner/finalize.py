"""The chord's callback: claim the fusion, run its steps (:mod:`.fusing`: fuse, then export and evaluate), and
record the global model: contributions, the privacy report, the lineage and the baselines, saved with its files in
one transaction with the budget charge."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from market.federations.models import PrivacyLevel
from market.jobs.baselines import baselines_measure, best_silo_submission
from market.jobs.models import (
    ChunkStatus,
    GlobalModel,
    GlobalModelFile,
    Job,
    JobChunk,
    JobPhase,
    JobStatus,
)
from market.jobs.selectors import job_members
from market.jobs.services import CHARGED_FOR_MODEL, job_log, job_release
from market.jobs.spending import job_budget_charge
from market.storage import (
    arrays_from_npz_cached,
    artifact_save,
    artifacts_removed_on_error,
    sha256_of,
)
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
from workers.runner.leases import code_version, lease_kept, lease_seconds, worker_id
from workers.runner.lifecycle import (
    JobInputError,
    JobSuperseded,
    failing_on_unexpected,
    job_artifacts_delete,
    job_end,
    job_stage_set,
    job_stop_if_cancelled,
    logger,
)
from workers.runner.valuing import (
    NO_SILO_VALUED,
    contribution_weights_unused,
    job_contribution_values,
)

CONTRIBUTION_RULE = (
    "Each silo's weight is the number of public examples the global model was trained on where its "
    "members' signal (FedKT: consistent votes) agreed with the fused label, summed over its "
    "submissions and normalised so that the weights add up to 1 (equal weights if no member agreed)."
)


def _claim_finalize(job_id: int) -> bool:
    now = timezone.now()
    # phase and status are conditions on the updated row: re-checked after a concurrent claim's lock is released
    unfinished = JobChunk.objects.filter(job_id=OuterRef("pk")).exclude(status=ChunkStatus.DONE)
    return (
        Job.objects.filter(
            ~Exists(unfinished),
            id=job_id,
            status=JobStatus.RUNNING,
            phase=JobPhase.PREDICTING,
            cancel_requested=False,
        ).update(
            phase=JobPhase.FUSING,
            worker=worker_id(),
            heartbeat_at=now,
            lease_expires_at=now + timedelta(seconds=lease_seconds()),
        )
        == 1
    )


def job_finalize_release(*, job_id: int) -> None:
    Job.objects.filter(
        id=job_id, status=JobStatus.RUNNING, phase=JobPhase.FUSING, worker=worker_id()
    ).update(phase=JobPhase.PREDICTING)


@failing_on_unexpected("fusing")
def job_finalize(*, job_id: int) -> None:
    """Sum the chunks' signals, add L1 noise once, fuse, evaluate the exported model, save the global model."""
    if not _claim_finalize(job_id):
        return
    job = Job.objects.select_related("federation", "public_dataset", "evaluation_split").get(
        id=job_id
    )
    try:
        with lease_kept(job_id=job_id):
            job_stage_set(job_id=job_id, stage="fusing")
            fused = job_fuse(job)
            if job_stop_if_cancelled(job_id=job_id) or fused is None:
                return
            job_stage_set(job_id=job_id, stage="evaluating")
            evaluated = job_evaluate(job, fused)
            if job_stop_if_cancelled(job_id=job_id):
                return
            job_stage_set(job_id=job_id, stage="saving")
            job_release(job=job, lines=evaluated.report_lines)
            _save(job, fused, evaluated)
    except JobInputError as error:
        job_end(job_id=job_id, status=JobStatus.FAILED, reason=str(error), step_error=True)


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
    if job.privacy_level == PrivacyLevel.L1:
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
    if job.privacy_level == PrivacyLevel.L2:
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
        if job.privacy_level == PrivacyLevel.L1
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
    return measured


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
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        # Re-read under the row lock: a cancel, or the reaper handing the job to another worker while this one
        # fused, drops this result (JobSuperseded) instead of saving a second global model or charging twice.
        locked = Job.objects.select_for_update().get(id=job.id)
        if (
            locked.status != JobStatus.RUNNING
            or locked.phase != JobPhase.FUSING
            or locked.worker != worker_id()
            or locked.cancel_requested
        ):
            raise JobSuperseded()
        global_model = GlobalModel.objects.create(job=locked, **fields)
        for file in evaluated.files:
            stored_name = artifact_save(
                name=f"federations/{job.federation.slug}/global-models/{global_model.id}/"
                f"{file.filename}",
                data=file.data,
                stored_names=stored_names,
            )
            GlobalModelFile.objects.create(
                global_model=global_model,
                role=file.role,
                format=file.format,
                stored_name=stored_name,
                sha256=sha256_of(file.data),
                size_bytes=len(file.data),
            )
        locked.status, locked.finished_at, locked.phase = JobStatus.SUCCEEDED, timezone.now(), ""
        locked.progress_stage, locked.worker, locked.lease_expires_at = "done", "", None
        locked.save(
            update_fields=[
                "status",
                "finished_at",
                "phase",
                "progress_stage",
                "worker",
                "lease_expires_at",
            ]
        )
        if job.privacy_level == PrivacyLevel.L1:
            job_budget_charge(
                job=locked,
                privacy_report=privacy_report,
                reason=CHARGED_FOR_MODEL.format(global_model=global_model.id),
            )
        job_log(job_id=job.id, message=f"Succeeded: global model #{global_model.id} saved.")
    job_artifacts_delete(
        job=job
    )  # after the commit, as in job_end: a rollback keeps what a retry reads


def job_finalize_safely(*, job_id: int) -> None:
    try:
        job_finalize(job_id=job_id)
    except JobSuperseded:
        if job_stop_if_cancelled(job_id=job_id):
            return
        logger.info("Job %s was taken over by another worker; this result is dropped.", job_id)
