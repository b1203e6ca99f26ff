"""The worker side of a job: claim, fan out over chunks of members, fuse, evaluate, save; and the reaper.

The job row in PostgreSQL is the truth, not the broker. Every step starts with a conditional UPDATE that
only one worker can win (a duplicate or redelivered message finds nothing to claim and returns), holds a
lease that a heartbeat thread renews, and checks ``cancel_requested`` between steps. The fan-out is a Celery
group of chunk tasks; each stores its partial signal sum and per-member data as an artifact in Django storage
(not in the broker), and the last chunk to finish queues the fusion. The periodic reaper re-queues jobs whose
lease expired (a worker killed mid-job) or fails them after ``ONEFOLD_JOB_MAX_ATTEMPTS``, and sweeps the outbox.

Steps: ``job_start`` (claim, plan chunks, dispatch) → ``job_chunk_run`` per chunk → ``job_finalize``.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import subprocess
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from market.federations.models import PrivacyLevel
from market.jobs.models import ChunkStatus, GlobalModel, GlobalModelFile, Job, JobChunk, JobPhase, JobStatus
from market.jobs.services import job_enqueue, job_log, job_settle_budget
from market.storage import artifact_read, artifact_save, artifacts_removed_on_error, arrays_from_npz, arrays_to_npz, sha256_of
from market.submissions.models import Submission, SubmissionStatus

logger = logging.getLogger(__name__)
CONTRIBUTION_RULE = ("Each silo's weight is the number of public examples the global model was trained on where its "
                     "members' signal (FedKT: consistent votes) agreed with the fused label, summed over its "
                     "submissions and normalised so that the weights add up to 1 (equal weights if no member agreed).")


class JobInputError(Exception):
    """Bad input (a corrupt artifact, a deleted submission, a model that fails): the job fails at once."""


def job_setting(name: str, default: int | float):
    return getattr(settings, name, default)


def lease_seconds() -> float:
    return job_setting("ONEFOLD_JOB_LEASE_SECONDS", 120)


@functools.cache
def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@functools.cache
def code_version() -> str:
    if os.environ.get("ONEFOLD_CODE_VERSION"):
        return os.environ["ONEFOLD_CODE_VERSION"]
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parents[2], check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _algorithm(kind: str):
    from importlib import import_module

    from workers.algorithms import registry

    if kind not in registry.ALGORITHMS:
        try:
            import_module(f"workers.algorithms.{kind}")
        except ImportError:
            pass
    return registry.algorithm_get(kind)


@contextmanager
def lease_kept(*, job_id: int, chunk_id: int | None = None):
    """Renew the job's (and the chunk's) lease every heartbeat interval while the block runs."""
    stop = threading.Event()

    def beat():
        try:
            while not stop.wait(job_setting("ONEFOLD_JOB_HEARTBEAT_SECONDS", 20)):
                _renew(job_id=job_id, chunk_id=chunk_id)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _renew(*, job_id: int, chunk_id: int | None) -> None:
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    Job.objects.filter(id=job_id, status=JobStatus.RUNNING).update(heartbeat_at=now, lease_expires_at=expires)
    if chunk_id is not None:
        JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
            lease_expires_at=expires)


def _stage(job_id: int, stage: str) -> None:
    Job.objects.filter(id=job_id).update(progress_stage=stage)
    job_log(job_id=job_id, message=f"Stage: {stage}.")


def _failing_on_unexpected(step: str):
    """Unexpected errors (a bug, a time limit) fail the job with a readable reason instead of leaving it running;
    transient ones (database, broker) propagate so that the task retries with backoff."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*, job_id: int | None = None, chunk_id: int | None = None):
            from workers.tasks import TRANSIENT_ERRORS

            try:
                return function(**({"job_id": job_id} if chunk_id is None else {"chunk_id": chunk_id}))
            except (TRANSIENT_ERRORS + (_Superseded,)):
                raise
            except Exception as error:
                logger.exception("Job step %s failed", step)
                owner = job_id if chunk_id is None else JobChunk.objects.filter(id=chunk_id).values_list(
                    "job_id", flat=True).first()
                if owner is not None:
                    job_end(job_id=owner, status=JobStatus.FAILED,
                            reason=f"Internal error while {step}: {type(error).__name__}: {error}")
        return wrapper
    return decorate


# --- ending a job -------------------------------------------------------------------------------------------

def _delete_artifacts(job: Job) -> None:
    from django.core.files.storage import default_storage

    for name in JobChunk.objects.filter(job=job).exclude(artifact_name="").values_list("artifact_name", flat=True):
        default_storage.delete(name)


def job_end(*, job_id: int, status: str, reason: str = "") -> bool:
    """Move a running (or queued) job to failed or cancelled, settling its budget; False if it had already ended."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(id=job_id,
                                                     status__in=[JobStatus.RUNNING, JobStatus.QUEUED]).first()
        if job is None:
            return False
        job.status, job.failure_reason, job.finished_at = status, reason, timezone.now()
        job.worker, job.lease_expires_at, job.phase = "", None, ""
        job.save(update_fields=["status", "failure_reason", "finished_at", "worker", "lease_expires_at", "phase"])
        job_settle_budget(job=job)
        job_log(job_id=job.id, level="error" if status == JobStatus.FAILED else "info",
                message=f"Failed: {reason}" if status == JobStatus.FAILED else "Cancelled; no global model was made.")
    _delete_artifacts(job)
    return True


def _stop_if_cancelled(job_id: int) -> bool:
    if Job.objects.filter(id=job_id, cancel_requested=True).exists():
        job_end(job_id=job_id, status=JobStatus.CANCELLED)
        return True
    return False


# --- start: claim and plan --------------------------------------------------------------------------------

@_failing_on_unexpected("starting")
def job_start(*, job_id: int) -> None:
    """Claim a queued job, split its members into chunks (once) and dispatch the chunks still to do."""
    now = timezone.now()
    claimed = Job.objects.filter(id=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
        status=JobStatus.RUNNING, phase=JobPhase.PREDICTING, worker=worker_id(), heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=lease_seconds()), attempts=F("attempts") + 1,
        started_at=Coalesce("started_at", now))
    if not claimed:
        return
    job = Job.objects.get(id=job_id)
    job_log(job_id=job_id, message=f"Claimed by worker {worker_id()} (attempt {job.attempts}).")
    try:
        chunks = _planned_chunks(job)
    except JobInputError as error:
        job_end(job_id=job_id, status=JobStatus.FAILED, reason=str(error))
        return
    _stage(job_id, "predicting")
    _dispatch(job_id, [chunk.id for chunk in chunks if chunk.status != ChunkStatus.DONE])


def _dispatch(job_id: int, chunk_ids: list[int]) -> None:
    from celery import group

    from workers.tasks import job_chunk_task, job_finalize_task

    if chunk_ids:
        group(job_chunk_task.s(chunk_id) for chunk_id in chunk_ids).apply_async()
    else:
        job_finalize_task.delay(job_id)


def _members(submissions: list[Submission]):
    from workers.algorithms.registry import Member

    return [Member(key=str(submission.id), organisation=str(submission.organisation_id),
                   n_examples=submission.n_local_examples, validation_score=submission.local_validation_score,
                   n_models=submission.model_files.count(),
                   label_distribution=tuple(submission.label_distribution) if submission.label_distribution else None)
            for submission in submissions]


def _planned_chunks(job: Job) -> list[JobChunk]:
    existing = list(job.chunks.all())
    if existing:
        return existing
    submissions = list(job.submissions.order_by("id"))
    members = _members(submissions)
    try:
        selected = _algorithm(job.kind).select(members, job.parameters, seed=job.seed)
    except ValueError as error:
        raise JobInputError(f"The members could not be selected: {error}") from error
    ids = [submissions[index].id for index in selected]
    size = max(1, int(job_setting("ONEFOLD_JOB_CHUNK_SIZE", 25)))
    with transaction.atomic():
        chunks = JobChunk.objects.bulk_create(
            [JobChunk(job=job, index=index, submission_ids=ids[start:start + size])
             for index, start in enumerate(range(0, len(ids), size))])
        Job.objects.filter(id=job.id).update(progress_total=len(ids), progress_done=0)
    job_log(job_id=job.id, message=f"{len(ids)} member(s) selected, predicted in {len(chunks)} chunk(s).")
    return chunks


# --- chunks -------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _arrays(stored_name: str) -> dict[str, np.ndarray]:
    """A public dataset or evaluation split, read once per process (artifacts are immutable)."""
    return arrays_from_npz(stored_name)


def _claim_chunk(chunk_id: int) -> bool:
    now = timezone.now()
    claimable = JobChunk.objects.filter(id=chunk_id, job__status=JobStatus.RUNNING, job__cancel_requested=False).filter(
        Q(status=ChunkStatus.PENDING) | Q(status=ChunkStatus.RUNNING, lease_expires_at__lt=now))
    return JobChunk.objects.filter(id__in=Subquery(claimable.values("id"))).update(
        status=ChunkStatus.RUNNING, worker=worker_id(), lease_expires_at=now + timedelta(seconds=lease_seconds()),
        attempts=F("attempts") + 1, members_done=0) == 1


def job_chunk_release(*, chunk_id: int) -> None:
    """Hand a chunk back (a transient error: the retried task, on any worker, claims it again)."""
    JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.PENDING, worker="", lease_expires_at=None)


def _model_bytes(submission_id: int) -> list[tuple[str, bytes]]:
    submission = Submission.objects.filter(id=submission_id).prefetch_related("model_files").first()
    if submission is None:
        raise JobInputError(f"Submission #{submission_id} was deleted after the job was created.")
    if submission.status != SubmissionStatus.VALID:
        raise JobInputError(f"Submission #{submission_id} is no longer valid ({submission.status}).")
    files = []
    for model_file in submission.model_files.all():
        try:
            files.append((model_file.original_name, artifact_read(model_file.stored_name)))
        except FileNotFoundError as error:
            raise JobInputError(f"Submission #{submission_id}: its model file '{model_file.original_name}' is "
                                "missing from storage.") from error
        if sha256_of(files[-1][1]) != model_file.sha256:
            raise JobInputError(f"Submission #{submission_id}: its model file '{model_file.original_name}' is corrupt "
                                "(its content no longer matches the SHA-256 recorded at upload).")
    return files


def _predict_chunk(chunk: JobChunk, features: np.ndarray, n_classes: int) -> dict[int, np.ndarray]:
    """Probabilities ``(n_models, n_rows, K)`` of every member of the chunk, computed in one sandbox child."""
    from market.submissions.services import model_limits, sandbox_limits
    from workers.modelio import predict_in_sandbox

    files = {submission_id: _model_bytes(submission_id) for submission_id in chunk.submission_ids}
    flat = [(submission_id, name, data) for submission_id, named in files.items() for name, data in named]
    outcomes = predict_in_sandbox([data for _, _, data in flat], features, n_classes=n_classes,
                                  limits=sandbox_limits(), model_limits=model_limits(),
                                  skip_structural_checks=settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS)
    result: dict[int, list] = {submission_id: [] for submission_id in chunk.submission_ids}
    for (submission_id, name, _), outcome in zip(flat, outcomes):
        if outcome.error:
            raise JobInputError(f"Submission #{submission_id}: model file '{name}' failed at predict time: "
                                f"{outcome.error}")
        probabilities = outcome.probabilities
        if probabilities.shape != (len(features), n_classes) or not np.all(np.isfinite(probabilities)):
            raise JobInputError(f"Submission #{submission_id}: model file '{name}' returned unusable predictions "
                                f"(shape {probabilities.shape}, finite: {bool(np.all(np.isfinite(probabilities)))}).")
        result[submission_id].append(probabilities)
    return {submission_id: np.stack(probabilities) for submission_id, probabilities in result.items()}


@_failing_on_unexpected("predicting a chunk of members")
def job_chunk_run(*, chunk_id: int) -> None:
    """Predict the public data and the evaluation split with every member of one chunk; store the partial sums."""
    if not _claim_chunk(chunk_id):
        job_id = JobChunk.objects.filter(id=chunk_id).values_list("job_id", flat=True).first()
        if job_id is not None:
            _stop_if_cancelled(job_id)
        return
    chunk = JobChunk.objects.select_related("job__public_dataset", "job__evaluation_split", "job__federation").get(
        id=chunk_id)
    job = chunk.job
    _renew(job_id=job.id, chunk_id=None)
    if _stop_if_cancelled(job.id):
        return
    try:
        with lease_kept(job_id=job.id, chunk_id=chunk_id):
            artifact, member_metrics = _chunk_artifact(chunk, job)
    except JobInputError as error:
        job_end(job_id=job.id, status=JobStatus.FAILED, reason=str(error))
        return
    if _stop_if_cancelled(job.id):
        return
    done = JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.DONE, artifact_name=artifact, member_metrics=member_metrics,
        members_done=len(chunk.submission_ids), finished_at=timezone.now())
    if not done:  # the reaper handed this chunk to another worker meanwhile; its result wins
        return
    chunk_sums = JobChunk.objects.filter(job_id=job.id, status=ChunkStatus.DONE).values("job_id").annotate(
        total=Sum("members_done")).values("total")
    Job.objects.filter(id=job.id).update(progress_done=Subquery(chunk_sums))
    job_log(job_id=job.id, message=f"Chunk {chunk.index + 1}: {len(chunk.submission_ids)} member(s) predicted.")
    _queue_finalize_if_done(job.id)


def _chunk_artifact(chunk: JobChunk, job: Job) -> tuple[str, dict]:
    from workers.jobs.metrics import classification_metrics

    try:
        public = _arrays(job.public_dataset.features_file)["features"]
        evaluation = _arrays(job.evaluation_split.data_file)
    except FileNotFoundError as error:
        raise JobInputError("The federation's public data or evaluation split is missing from storage.") from error
    n_classes = job.federation.n_classes
    probabilities = _predict_chunk(chunk, np.vstack([public, evaluation["features"]]), n_classes)
    algorithm = _algorithm(job.kind)
    members = {member.key: member for member in _members(list(Submission.objects.filter(id__in=chunk.submission_ids)))}
    signals, evaluation_probabilities, metrics = [], [], {}
    for submission_id in chunk.submission_ids:
        member_probabilities = probabilities[submission_id]
        signals.append(np.asarray(algorithm.member_signal(member_probabilities[:, :len(public)],
                                                          member=members[str(submission_id)], n_classes=n_classes,
                                                          params=job.parameters)))
        averaged = member_probabilities[:, len(public):].mean(axis=0)
        evaluation_probabilities.append(averaged)
        metrics[str(submission_id)] = classification_metrics(averaged, evaluation["labels"], n_classes=n_classes)
    signals = np.stack(signals)
    data = arrays_to_npz(signal_sum=signals.sum(axis=0), member_signals=signals,
                         member_ids=np.asarray(chunk.submission_ids, dtype=np.int64),
                         evaluation_probabilities=np.stack(evaluation_probabilities))
    name = artifact_save(name=f"jobs/{job.id}/chunks/{chunk.index}.npz", data=data, stored_names=[])
    return name, metrics


def _queue_finalize_if_done(job_id: int) -> None:
    from workers.tasks import job_finalize_task

    unfinished = JobChunk.objects.filter(job_id=OuterRef("pk")).exclude(status=ChunkStatus.DONE)
    if Job.objects.filter(id=job_id, status=JobStatus.RUNNING, phase=JobPhase.PREDICTING).filter(
            ~Exists(unfinished)).exists():
        job_finalize_task.delay(job_id)


# --- finalize: fuse, evaluate, save -------------------------------------------------------------------------

def _claim_finalize(job_id: int) -> bool:
    now = timezone.now()
    unfinished = JobChunk.objects.filter(job_id=OuterRef("pk")).exclude(status=ChunkStatus.DONE)
    claimable = Job.objects.filter(id=job_id, status=JobStatus.RUNNING, phase=JobPhase.PREDICTING,
                                   cancel_requested=False).filter(~Exists(unfinished))
    return Job.objects.filter(id__in=Subquery(claimable.values("id"))).update(
        phase=JobPhase.FUSING, worker=worker_id(), heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=lease_seconds())) == 1


def job_finalize_release(*, job_id: int) -> None:
    Job.objects.filter(id=job_id, status=JobStatus.RUNNING, phase=JobPhase.FUSING, worker=worker_id()).update(
        phase=JobPhase.PREDICTING)


@_failing_on_unexpected("fusing")
def job_finalize(*, job_id: int) -> None:
    """Sum the chunks' signals, add L1 noise once, fuse, evaluate the exported model, save the global model."""
    if not _claim_finalize(job_id):
        return
    job = Job.objects.select_related("federation", "public_dataset", "evaluation_split").get(id=job_id)
    try:
        with lease_kept(job_id=job_id):
            _stage(job_id, "fusing")
            result = _fused(job)
            if _stop_if_cancelled(job_id):
                return
            _stage(job_id, "evaluating")
            outcome = _evaluated(job, result)
            if _stop_if_cancelled(job_id):
                return
            _stage(job_id, "saving")
            _save(job, result, outcome)
    except JobInputError as error:
        job_end(job_id=job_id, status=JobStatus.FAILED, reason=str(error))


def _chunk_arrays(job: Job):
    for chunk in job.chunks.order_by("index"):
        try:
            yield chunk, arrays_from_npz(chunk.artifact_name)
        except (FileNotFoundError, ValueError, OSError) as error:
            raise JobInputError(f"The partial results of chunk {chunk.index + 1} are missing or corrupt.") from error


def _noise(job: Job):
    if job.privacy_level != PrivacyLevel.L1:
        return None
    from workers.jobs.noise import replayable_noise
    from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise

    privacy = job.parameters["privacy"]
    mechanism = (LaplaceNoise(gamma=privacy["gamma"]) if privacy["mechanism"] == "laplace"
                 else GaussianNoise(sigma=privacy["sigma"]))
    stored = arrays_from_npz(job.noisy_answers_name)["noisy_counts"] if job.noisy_answers_name else None

    def store(noisy: np.ndarray) -> None:  # committed before the answers are used: they are spent from now on
        name = artifact_save(name=f"jobs/{job.id}/noisy-answers.npz", data=arrays_to_npz(noisy_counts=noisy),
                             stored_names=[])
        Job.objects.filter(id=job.id).update(noisy_answers_name=name, noise_drawn_at=timezone.now())
        job.noisy_answers_name, job.noise_drawn_at = name, timezone.now()
        job_log(job_id=job.id, message="Noise drawn and stored; a retry reuses these noisy answers.")

    if stored is not None:
        job_log(job_id=job.id, message="Reusing the noisy answers drawn by an earlier attempt.")
    return replayable_noise(mechanism, stored=stored, on_draw=store)


def _fused(job: Job) -> dict:
    ids, signal_sum = [], None
    for chunk, arrays in _chunk_arrays(job):
        ids.extend(int(value) for value in arrays["member_ids"])
        signal_sum = arrays["signal_sum"] if signal_sum is None else signal_sum + arrays["signal_sum"]
    submissions = Submission.objects.in_bulk(ids)
    missing = [submission_id for submission_id in ids if submission_id not in submissions]
    if missing:
        raise JobInputError(f"Submission #{missing[0]} was deleted after the job was created.")
    members = _members([submissions[submission_id] for submission_id in ids])
    public = _arrays(job.public_dataset.features_file)["features"]
    try:
        fusion = _algorithm(job.kind).fuse(signal_sum, public, members=members, n_classes=job.federation.n_classes,
                                           params=job.parameters, noise=_noise(job), seed=job.seed)
    except ValueError as error:
        raise JobInputError(f"The fusion failed: {error}") from error
    job_log(job_id=job.id, message=f"Fused {len(members)} member(s); the global model was trained on "
                                   f"{int(np.count_nonzero(fusion.trained))} public example(s).")
    return {"fusion": fusion, "ids": ids, "submissions": submissions}


def _evaluated(job: Job, result: dict) -> dict:
    from market.submissions.services import model_limits, sandbox_limits
    from workers.jobs.export import bundle_zip, export_global_model, model_family_of
    from workers.jobs.metrics import classification_metrics
    from workers.modelio import predict_in_sandbox

    fusion, n_classes = result["fusion"], job.federation.n_classes
    evaluation = _arrays(job.evaluation_split.data_file)
    n_features = job.public_dataset.n_features
    verification = {}
    if fusion.model is not None:
        try:
            files = export_global_model(fusion.model, n_features=n_features, n_classes=n_classes)
        except ValueError as error:
            raise JobInputError(str(error)) from error
        portable = next(file for file in files if file.format == "onnx")
        outcome = predict_in_sandbox([portable.data], evaluation["features"], n_classes=n_classes,
                                     limits=sandbox_limits(), model_limits=model_limits())[0]
        if outcome.error:
            raise JobInputError(f"The exported global model could not be run: {outcome.error}")
        probabilities = outcome.probabilities
        native = np.asarray(fusion.model.predict_proba(evaluation["features"]))
        verification = {"portable_vs_native_max_abs_difference": float(np.max(np.abs(probabilities - native)))}
        family = model_family_of(fusion.model)
    else:
        weights = fusion.details.get("weights") or {str(i): 1.0 for i in result["ids"]}
        total = sum(weights.get(str(i), 0.0) for i in result["ids"])
        probabilities, members = 0.0, []
        for chunk, arrays in _chunk_arrays(job):
            for member_id, member_probabilities in zip(arrays["member_ids"], arrays["evaluation_probabilities"]):
                weight = weights.get(str(int(member_id)), 0.0) / total
                probabilities = probabilities + weight * member_probabilities
                for position, model_file in enumerate(result["submissions"][int(member_id)].model_files.all()):
                    members.append({"filename": f"member-{int(member_id)}-{position}.{model_file.format}",
                                    "format": model_file.format, "weight": weight / max(1, result["submissions"][
                                        int(member_id)].model_files.count()),
                                    "data": artifact_read(model_file.stored_name)})
        from workers.jobs.export import ExportedFile

        files = [ExportedFile("native", "bundle", "bundle.zip",
                              bundle_zip(members, n_classes=n_classes, n_features=n_features))]
        family = "ensemble"
    metrics = classification_metrics(probabilities, evaluation["labels"], n_classes=n_classes)
    job_log(job_id=job.id, message=f"Global model accuracy on the evaluation split: {metrics['accuracy']:.4f}.")
    return {"files": files, "metrics": metrics, "family": family, "verification": verification}


def _contributions(job: Job, result: dict) -> dict:
    from workers.algorithms.registry import agreement_counts

    fusion = result["fusion"]
    trained = np.asarray(fusion.trained, dtype=bool)
    labels = np.asarray(fusion.labels)
    per_organisation: dict[str, float] = {}
    for _, arrays in _chunk_arrays(job):
        for member_id, signal in zip(arrays["member_ids"], arrays["member_signals"]):
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
            raise JobInputError("The engine returned no privacy analysis for an L1 job; the job cannot be charged.")
        report["data_independent"] = analysis.data_independent.as_dict()
        report["data_dependent"] = analysis.data_dependent.as_dict()
    elif job.privacy_level == PrivacyLevel.L2:
        report["submissions"] = {str(i): result["submissions"][i].privacy_report for i in result["ids"]}
    return report


def _lineage(job: Job, result: dict, outcome: dict) -> dict:
    return {"job": job.id, "kind": job.kind, "privacy_level": job.privacy_level, "submissions": result["ids"],
            "submission_sha256": {str(i): result["submissions"][i].content_sha256 for i in result["ids"]},
            "public_dataset": {"id": job.public_dataset_id, "content_sha256": job.public_dataset.content_sha256,
                               "features_sha256": job.public_dataset.features_sha256},
            "evaluation_split": job.evaluation_split_id, "code_version": code_version(), "seed": job.seed,
            "parameters": job.parameters, "dp_noise": "unseeded (OpenDP, cryptographically secure)"
            if job.privacy_level == PrivacyLevel.L1 else None,
            "fusion": _json_ready(result["fusion"].details), "verification": outcome["verification"]}


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


def _save(job: Job, result: dict, outcome: dict) -> None:
    submission_metrics = {}
    for chunk in job.chunks.all():
        submission_metrics.update(chunk.member_metrics)
    privacy_report = _privacy_report(job, result)
    fields = {"federation": job.federation, "model_family": outcome["family"],
              "n_features": job.public_dataset.n_features, "n_classes": job.federation.n_classes,
              "metrics": outcome["metrics"], "submission_metrics": submission_metrics,
              "privacy_report": privacy_report, "lineage": _lineage(job, result, outcome),
              "contribution_weights": _contributions(job, result), "contribution_rule": CONTRIBUTION_RULE}
    with artifacts_removed_on_error() as stored_names, transaction.atomic():
        locked = Job.objects.select_for_update().get(id=job.id)
        if (locked.status != JobStatus.RUNNING or locked.phase != JobPhase.FUSING or locked.worker != worker_id()
                or locked.cancel_requested):
            raise _Superseded()
        global_model = GlobalModel.objects.create(job=locked, **fields)
        for file in outcome["files"]:
            stored_name = artifact_save(name=f"federations/{job.federation.slug}/global-models/{global_model.id}/"
                                             f"{file.filename}", data=file.data, stored_names=stored_names)
            GlobalModelFile.objects.create(global_model=global_model, role=file.role, format=file.format,
                                           stored_name=stored_name, sha256=sha256_of(file.data),
                                           size_bytes=len(file.data))
        locked.status, locked.finished_at, locked.phase = JobStatus.SUCCEEDED, timezone.now(), ""
        locked.progress_stage, locked.worker, locked.lease_expires_at = "done", "", None
        locked.save(update_fields=["status", "finished_at", "phase", "progress_stage", "worker", "lease_expires_at"])
        if job.privacy_level == PrivacyLevel.L1:
            from market.jobs.services import budget_services

            budgets = budget_services()
            if budgets is not None:
                budgets.budget_charge_for_job(job=locked, privacy_report=privacy_report)
        job_log(job_id=job.id, message=f"Succeeded: global model #{global_model.id} saved.")
    _delete_artifacts(job)


class _Superseded(Exception):
    """The job was cancelled or handed to another worker while this one fused; its result is dropped."""


def job_finalize_safely(*, job_id: int) -> None:
    try:
        job_finalize(job_id=job_id)
    except _Superseded:
        if _stop_if_cancelled(job_id):
            return
        logger.info("Job %s was taken over by another worker; this result is dropped.", job_id)


# --- reaper -------------------------------------------------------------------------------------------------

def job_reap() -> dict:
    """Re-queue running jobs whose lease expired, or fail them after too many attempts; sweep the outbox."""
    from market.jobs.services import outbox_sweep

    now = timezone.now()
    counts = {"requeued": 0, "failed": 0, "cancelled": 0}
    for job in Job.objects.filter(status=JobStatus.RUNNING, lease_expires_at__lt=now):
        if job.cancel_requested:
            counts["cancelled"] += job_end(job_id=job.id, status=JobStatus.CANCELLED)
        elif job.attempts >= job_setting("ONEFOLD_JOB_MAX_ATTEMPTS", 3):
            counts["failed"] += job_end(job_id=job.id, status=JobStatus.FAILED, reason=(
                f"The worker running this job stopped sending heartbeats (last at {_when(job.heartbeat_at)}) on "
                f"attempt {job.attempts} of {job.attempts}; it was not retried again."))
        else:
            counts["requeued"] += _requeue(job)
    outbox_sweep(older_than_seconds=job_setting("ONEFOLD_JOB_OUTBOX_GRACE_SECONDS", 10))
    return counts


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "never"


def _requeue(job: Job) -> bool:
    with transaction.atomic():
        requeued = Job.objects.filter(id=job.id, status=JobStatus.RUNNING,
                                      lease_expires_at=job.lease_expires_at).update(
            status=JobStatus.QUEUED, phase="", worker="", lease_expires_at=None, progress_stage="waiting for a worker")
        if not requeued:
            return False
        JobChunk.objects.filter(job=job, status=ChunkStatus.RUNNING).update(status=ChunkStatus.PENDING, worker="",
                                                                           lease_expires_at=None)
        job_log(job_id=job.id, level="warning", message=f"No heartbeat from worker {job.worker or 'unknown'} since "
                                                        f"{_when(job.heartbeat_at)}; re-queued.")
        job_enqueue(job=job)
    return True


__all__ = ["JobInputError", "job_chunk_release", "job_chunk_run", "job_end", "job_finalize_release",
           "job_finalize_safely", "job_reap", "job_start"]
