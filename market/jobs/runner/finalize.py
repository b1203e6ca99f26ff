"""The chord's callback: sum the chunks' signals, add L1 noise once (stored, replayed on retry), fuse through
the registry, evaluate the exported portable model in the sandbox, compute contributions, the privacy report
and the lineage, and save the global model and its files in one transaction with the budget charge."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from market.budgets.services import budget_charge_for_job
from market.feature_views import job_feature_view, stored_features_in_view
from market.federations.models import PrivacyLevel
from market.jobs.baselines import baselines_measure
from market.jobs.models import (
    ChunkStatus,
    GlobalModel,
    GlobalModelFile,
    Job,
    JobChunk,
    JobPhase,
    JobStatus,
)
from market.jobs.runner.leases import code_version, lease_kept, lease_seconds, worker_id
from market.jobs.runner.lifecycle import (
    JobInputError,
    JobSuperseded,
    failing_on_unexpected,
    job_artifacts_delete,
    job_end,
    job_stage_set,
    job_stop_if_cancelled,
    logger,
)
from market.jobs.selectors import job_members
from market.jobs.services import job_log
from market.sandbox import stored_models_predict
from market.storage import (
    arrays_from_npz,
    arrays_from_npz_cached,
    arrays_to_npz,
    artifact_read,
    artifact_save,
    artifacts_removed_on_error,
    sha256_of,
)
from market.submissions.models import Submission
from workers.algorithms import algorithm_get
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.registry import agreement_counts
from workers.features import ONE_HOT_VIEW, view_width
from workers.jobs.export import ExportedFile, export_global_model, model_family_of
from workers.jobs.interruptible import fuse_in_child
from workers.metrics import classification_metrics
from workers.modelio.bundle import BundleMember, bundle_write
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise

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
            result = _fused(job)
            if job_stop_if_cancelled(job_id=job_id):
                return
            job_stage_set(job_id=job_id, stage="evaluating")
            outcome = _evaluated(job, result)
            if job_stop_if_cancelled(job_id=job_id):
                return
            job_stage_set(job_id=job_id, stage="saving")
            _save(job, result, outcome)
    except JobInputError as error:
        job_end(job_id=job_id, status=JobStatus.FAILED, reason=str(error))


def _chunk_arrays(job: Job):
    for chunk in job.chunks.order_by("index"):
        try:
            yield chunk, arrays_from_npz(chunk.artifact_name)
        except (FileNotFoundError, ValueError, OSError) as error:
            raise JobInputError(
                f"The partial results of chunk {chunk.index + 1} are missing or corrupt."
            ) from error


def _noise(job: Job) -> dict:
    """The L1 mechanism, the answers an earlier attempt drew, and how a fresh draw is stored (``fuse_in_child``)."""
    if job.privacy_level != PrivacyLevel.L1:
        return {}
    privacy = job.parameters["privacy"]
    mechanism = (
        LaplaceNoise(gamma=privacy["gamma"])
        if privacy["mechanism"] == "laplace"
        else GaussianNoise(sigma=privacy["sigma"])
    )
    stored = (
        arrays_from_npz(job.noisy_answers_name)["noisy_counts"] if job.noisy_answers_name else None
    )

    def store(
        noisy: np.ndarray,
    ) -> None:  # committed before the answers are used: they are spent from now on
        name = artifact_save(
            name=f"jobs/{job.id}/noisy-answers.npz",
            data=arrays_to_npz(noisy_counts=noisy),
            stored_names=[],
        )
        Job.objects.filter(id=job.id).update(noisy_answers_name=name, noise_drawn_at=timezone.now())
        job.noisy_answers_name, job.noise_drawn_at = name, timezone.now()
        job_log(
            job_id=job.id, message="Noise drawn and stored; a retry reuses these noisy answers."
        )

    if stored is not None:
        job_log(job_id=job.id, message="Reusing the noisy answers drawn by an earlier attempt.")
    return {"noise": mechanism, "stored_noise": stored, "on_noise_drawn": store}


def _cancel_requested(job_id: int) -> bool:
    return Job.objects.filter(id=job_id, cancel_requested=True).exists()


def _fusion_started(job: Job, pid: int) -> None:
    job_log(job_id=job.id, message=f"Fusing in a child process (pid {pid}) that a cancel stops.")


def _fused(job: Job) -> dict | None:
    ids, signal_sum = [], None
    for _chunk, arrays in _chunk_arrays(job):
        ids.extend(int(value) for value in arrays["member_ids"])
        signal_sum = (
            arrays["signal_sum"] if signal_sum is None else signal_sum + arrays["signal_sum"]
        )
    submissions = Submission.objects.prefetch_related("model_files").in_bulk(ids)
    missing = [submission_id for submission_id in ids if submission_id not in submissions]
    if missing:
        raise JobInputError(f"Submission #{missing[0]} was deleted after the job was created.")
    members = job_members(submissions=[submissions[submission_id] for submission_id in ids])
    settings = algorithm_get(job.kind).validate(job.parameters)
    view = job_feature_view(settings)
    public = stored_features_in_view(
        arrays_from_npz_cached(job.public_dataset.features_file)["features"],
        job.public_dataset,
        view,
    )

    evaluation = (
        _evaluation_rows(job, view) if algorithm_get(job.kind).reads_evaluation(settings) else None
    )
    try:
        fusion = fuse_in_child(
            kind=job.kind,
            signal_sum=signal_sum,
            public_features=public,
            members=members,
            n_classes=job.federation.n_classes,
            params=job.parameters,
            seed=job.seed,
            evaluation=evaluation,
            **_noise(job),
            cancelled=lambda: _cancel_requested(job.id),
            on_start=lambda pid: _fusion_started(job, pid),
        )
    except ValueError as error:
        raise JobInputError(f"The fusion failed: {error}") from error
    if fusion is None:  # cancelled while fitting; the child is gone and job_finalize ends the job
        return None
    job_log(
        job_id=job.id,
        message=f"Fused {len(members)} member(s); the global model was trained on "
        f"{int(np.count_nonzero(fusion.trained))} public example(s).",
    )
    # an ensemble (also one that vote: auto chose) fits nothing: its bundle reads the one-hot view, each member its own
    return {
        "fusion": fusion,
        "ids": ids,
        "submissions": submissions,
        "feature_view": view if fusion.model is not None else ONE_HOT_VIEW,
    }


def _evaluation_rows(job: Job, view: str):
    """The evaluation split in ``view`` and every member's probabilities of it, in the members' order (FedKT's
    ``vote: auto`` chooses on one half of it: workers.algorithms.auto_fusion)."""
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    member_probabilities = np.concatenate(
        [arrays["evaluation_probabilities"] for _, arrays in _chunk_arrays(job)]
    )
    return EvaluationRows(
        stored_features_in_view(evaluation["features"], job.public_dataset, view),
        evaluation["labels"],
        member_probabilities,
    )


def _report_rows(job: Job, fusion, labels) -> np.ndarray | None:
    """The evaluation rows a job reports on: the half its ``auto`` choice did not read, else None (all rows)."""
    if "auto" not in fusion.details:
        return None
    return evaluation_halves(labels, seed=job.seed)[1]


def _evaluated(job: Job, result: dict) -> dict:
    fusion, n_classes = result["fusion"], job.federation.n_classes
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    # a new dict: the cached arrays are shared by the process, and other steps read them in the one-hot view
    evaluation = {
        **evaluation,
        "features": stored_features_in_view(
            evaluation["features"], job.public_dataset, result["feature_view"]
        ),
    }
    n_features = evaluation["features"].shape[1]
    verification = {}
    if fusion.model is not None:
        try:
            files = export_global_model(fusion.model, n_features=n_features, n_classes=n_classes)
        except ValueError as error:
            raise JobInputError(str(error)) from error
        portable = next(file for file in files if file.format == "onnx")
        outcome = stored_models_predict(
            [portable.data], evaluation["features"], n_classes=n_classes
        )[0]
        if outcome.error:
            raise JobInputError(f"The exported global model could not be run: {outcome.error}")
        probabilities = outcome.probabilities
        native = np.asarray(fusion.model.predict_proba(evaluation["features"]))
        verification = {
            "portable_vs_native_max_abs_difference": float(np.max(np.abs(probabilities - native)))
        }
        family = model_family_of(fusion.model)
    else:
        weights = fusion.details.get("weights") or {str(i): 1.0 for i in result["ids"]}
        total = sum(weights.get(str(i), 0.0) for i in result["ids"])
        probabilities, members = 0.0, []
        for _chunk, arrays in _chunk_arrays(job):
            for member_id, member_probabilities in zip(
                arrays["member_ids"], arrays["evaluation_probabilities"]
            ):
                weight = weights.get(str(int(member_id)), 0.0) / total
                probabilities = probabilities + weight * member_probabilities
                if not weight:  # a member the selection left out is not shipped to buyers
                    continue
                for model_file in result["submissions"][int(member_id)].model_files.all():
                    # named by position: a submission id in a buyer's download would say whose model it is
                    members.append(
                        BundleMember(
                            format=model_file.format,
                            data=artifact_read(model_file.stored_name),
                            weight=weight
                            / max(1, result["submissions"][int(member_id)].model_files.count()),
                            feature_view=(model_file.info or {}).get("feature_view", ONE_HOT_VIEW),
                        )
                    )
        files = [
            ExportedFile(
                "native",
                "bundle",
                "bundle.zip",
                bundle_write(
                    members,
                    n_classes=n_classes,
                    n_features=n_features,
                    feature_spec=job.public_dataset.feature_spec,
                ),
            )
        ]
        family = "ensemble"
    report = _report_rows(job, fusion, evaluation["labels"])
    rows = slice(None) if report is None else report
    metrics = classification_metrics(
        probabilities[rows], evaluation["labels"][rows], n_classes=n_classes
    )
    if report is not None:
        chosen = fusion.details["auto"]
        job_log(
            job_id=job.id,
            message=f"Fusion chosen by auto: {chosen['chosen']} (best {chosen['criterion']} on "
            f"{chosen['selection_rows']} evaluation rows); metrics below are on the other "
            f"{chosen['report_rows']}.",
        )
    job_log(
        job_id=job.id,
        message=f"Global model accuracy on the evaluation split: {metrics['accuracy']:.4f}.",
    )
    return {"files": files, "metrics": metrics, "family": family, "verification": verification}


def _contributions(job: Job, result: dict) -> dict:
    fusion = result["fusion"]
    trained = np.asarray(fusion.trained, dtype=bool)
    labels = np.asarray(fusion.labels)
    per_organisation: dict[str, float] = {}
    for _, arrays in _chunk_arrays(job):
        for member_id, signal in zip(arrays["member_ids"], arrays["member_signals"]):
            signal = signal[
                :, : job.federation.n_classes
            ]  # auto: its first block, the consistent votes
            organisation = str(result["submissions"][int(member_id)].organisation_id)
            count = agreement_counts(signal[trained], labels[trained]) if trained.any() else 0
            per_organisation[organisation] = per_organisation.get(organisation, 0) + count
    total = sum(per_organisation.values())
    if total == 0:
        return {organisation: 1 / len(per_organisation) for organisation in per_organisation}
    return {organisation: count / total for organisation, count in sorted(per_organisation.items())}


def _privacy_report(job: Job, result: dict) -> dict:
    fusion = result["fusion"]
    report = {"level": job.privacy_level, "data_independent": None, "data_dependent": None}
    if job.privacy_level == PrivacyLevel.L1:
        analysis = fusion.privacy
        if analysis is None:
            raise JobInputError(
                "The engine returned no privacy analysis for an L1 job; the job cannot be charged."
            )
        report["data_independent"] = analysis.data_independent.as_dict()
        report["data_dependent"] = analysis.data_dependent.as_dict()
    elif job.privacy_level == PrivacyLevel.L2:
        report["submissions"] = {
            str(i): result["submissions"][i].privacy_report for i in result["ids"]
        }
    return report


def _lineage(job: Job, result: dict, outcome: dict) -> dict:
    return {
        "job": job.id,
        "kind": job.kind,
        "privacy_level": job.privacy_level,
        "submissions": result["ids"],
        "submission_sha256": {
            str(i): result["submissions"][i].content_sha256 for i in result["ids"]
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
        "fusion": _json_ready(result["fusion"].details),
        "verification": outcome["verification"],
        "feature_view": result["feature_view"],
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


def _baselines(job: Job, result: dict, outcome: dict, submission_metrics: dict) -> dict:
    """The majority-class guess and the best and average silo on the same evaluation split (market.jobs.baselines)."""
    confusion = outcome["metrics"]["confusion_matrix"]
    measured = baselines_measure(
        class_counts=[sum(row) for row in confusion],
        submission_metrics=submission_metrics,
        organisation_of={
            submission_id: submission.organisation_id
            for submission_id, submission in result["submissions"].items()
        },
    )
    # The log is read by every participant: it names no silo's own score (the job page decides who sees those).
    majority = measured["majority_class"]
    job_log(
        job_id=job.id,
        message=f"Baselines measured over {measured['n_silos']} silo(s); the majority-class guess "
        f"scores {majority['balanced_accuracy']:.4f} balanced accuracy."
        if majority
        else f"Baselines measured over {measured['n_silos']} silo(s).",
    )
    return measured


def _member_metrics_on(job: Job, rows: np.ndarray) -> dict:
    labels = arrays_from_npz_cached(job.evaluation_split.data_file)["labels"][rows]
    return {
        str(int(member_id)): classification_metrics(
            probabilities[rows], labels, n_classes=job.federation.n_classes
        )
        for _, arrays in _chunk_arrays(job)
        for member_id, probabilities in zip(
            arrays["member_ids"], arrays["evaluation_probabilities"]
        )
    }


def _save(job: Job, result: dict, outcome: dict) -> None:
    submission_metrics = {}
    for chunk in job.chunks.all():
        submission_metrics.update(chunk.member_metrics)
    report = _report_rows(
        job, result["fusion"], arrays_from_npz_cached(job.evaluation_split.data_file)["labels"]
    )
    if report is not None:  # the baselines are measured on the rows the global model is reported on
        submission_metrics = _member_metrics_on(job, report)
    privacy_report = _privacy_report(job, result)
    baselines = _baselines(job, result, outcome, submission_metrics)
    fields = {
        "federation": job.federation,
        "baselines": baselines,
        "model_family": outcome["family"],
        "n_features": view_width(job.public_dataset.feature_spec, result["feature_view"]),
        "n_classes": job.federation.n_classes,
        "metrics": outcome["metrics"],
        "submission_metrics": submission_metrics,
        "privacy_report": privacy_report,
        "lineage": _lineage(job, result, outcome),
        "contribution_weights": _contributions(job, result),
        "contribution_rule": CONTRIBUTION_RULE,
    }
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        locked = Job.objects.select_for_update().get(id=job.id)
        if (
            locked.status != JobStatus.RUNNING
            or locked.phase != JobPhase.FUSING
            or locked.worker != worker_id()
            or locked.cancel_requested
        ):
            raise JobSuperseded()
        global_model = GlobalModel.objects.create(job=locked, **fields)
        for file in outcome["files"]:
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
            budget_charge_for_job(job=locked, privacy_report=privacy_report)
        job_log(job_id=job.id, message=f"Succeeded: global model #{global_model.id} saved.")
    job_artifacts_delete(job=job)


def job_finalize_safely(*, job_id: int) -> None:
    try:
        job_finalize(job_id=job_id)
    except JobSuperseded:
        if job_stop_if_cancelled(job_id=job_id):
            return
        logger.info("Job %s was taken over by another worker; this result is dropped.", job_id)
