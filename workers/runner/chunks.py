"""Starting a job (claim, plan the chunks once, say which chunks are still to run) and running one chunk: every
member of it predicts the public data and the evaluation split in one sandbox child; the partial signal sum,
the members' signals and evaluation probabilities go to storage as one NPZ artifact. The Celery task module
(workers.tasks) dispatches what these steps return; they know nothing of Celery."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from market.feature_views import model_files_feature_view, stored_features_in_view
from market.jobs.models import ChunkStatus, Job, JobChunk, JobPhase, JobStatus
from market.jobs.selectors import job_members, job_model_files, own_models_used
from market.jobs.services import job_log
from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz_cached, artifact_read, artifact_save, sha256_of
from market.submissions.models import OWN_MODEL_ROLE, ModelFile, Submission, SubmissionStatus
from workers.algorithms import algorithm_get
from workers.jobs.chunks import ChunkSignals, chunk_signals_of, chunk_signals_to_npz
from workers.metrics import member_metrics
from workers.runner.leases import lease_kept, lease_renew, lease_seconds, worker_id
from workers.runner.lifecycle import (
    JobInputError,
    failing_on_unexpected,
    job_end,
    job_stage_set,
    job_stop_if_cancelled,
)


@failing_on_unexpected("starting")
def job_start(*, job_id: int) -> list[int] | None:
    """Claim a queued job and split its members into chunks (once): the ids of the chunks still to run (empty when
    every chunk is done and the fusion is due), or None when this worker has nothing to dispatch (another one
    claimed the job, or the job failed)."""
    now = timezone.now()
    # The UPDATE is the claim: a duplicate or redelivered start message finds the row no longer queued and
    # changes nothing. attempts counts claims (the reaper fails the job after ONEFOLD_JOB_MAX_ATTEMPTS), and a
    # re-queued job keeps the moment it first started.
    claimed = Job.objects.filter(id=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
        status=JobStatus.RUNNING,
        phase=JobPhase.PREDICTING,
        worker=worker_id(),
        heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        attempts=F("attempts") + 1,
        started_at=Coalesce("started_at", now),
    )
    if not claimed:
        return None
    job = Job.objects.get(id=job_id)
    job_log(job_id=job_id, message=f"Claimed by worker {worker_id()} (attempt {job.attempts}).")
    try:
        chunks = _planned_chunks(job)
    except JobInputError as error:
        job_end(job_id=job_id, status=JobStatus.FAILED, reason=str(error))
        return None
    job_stage_set(job_id=job_id, stage="predicting")
    return [chunk.id for chunk in chunks if chunk.status != ChunkStatus.DONE]


def _planned_chunks(job: Job) -> list[JobChunk]:
    existing = list(job.chunks.all())
    if existing:  # a re-claimed job keeps its plan, so the chunks a dead worker finished are not predicted again
        return existing
    submissions = list(job.submissions.order_by("id"))
    members = job_members(submissions=submissions, privacy_level=job.privacy_level)
    try:
        selected = algorithm_get(job.kind).select(members, job.parameters, seed=job.seed)
    except ValueError as error:
        raise JobInputError(f"The members could not be selected: {error}") from error
    ids = [submissions[index].id for index in selected]
    size = max(1, int(settings.ONEFOLD_JOB_CHUNK_SIZE))
    with transaction.atomic():
        # A claim re-queued while this one was still planning (its lease expired under load) plans the same chunks
        # from the same seed; whichever commits second keeps the first's rows.
        JobChunk.objects.bulk_create(
            [
                JobChunk(job=job, index=index, submission_ids=ids[start : start + size])
                for index, start in enumerate(range(0, len(ids), size))
            ],
            ignore_conflicts=True,
        )
        Job.objects.filter(id=job.id).update(progress_total=len(ids), progress_done=0)
    chunks = list(job.chunks.all())
    job_log(
        job_id=job.id,
        message=f"{len(ids)} member(s) selected, predicted in {len(chunks)} chunk(s).",
    )
    left_out = own_models_left_out(job, submissions)
    if left_out:
        job_log(job_id=job.id, message=left_out)
    return chunks


def own_models_left_out(job: Job, submissions: list[Submission]) -> str | None:
    """The job log's statement that an L1 job leaves the silos' own models out (market.jobs.selectors.
    own_models_used), or None when it uses them or no submission carries one."""
    if own_models_used(privacy_level=job.privacy_level):
        return None
    carrying = ModelFile.objects.filter(
        submission__in=submissions, info__role=OWN_MODEL_ROLE
    ).count()
    if not carrying:
        return None
    return (
        f"{carrying} submission(s) carry their silo's own model, which this {job.privacy_level} job does not use: "
        "an own model is trained without noise, so only L0 jobs use it. Their FedKT students vote, and their "
        "silo baselines are their students'."
    )


def job_chunk_claim(*, chunk_id: int) -> bool:
    """The status conditions sit on the updated row itself, so PostgreSQL re-checks them after waiting for a
    concurrent claim's lock (a condition inside a subquery would not be re-checked: two workers could win)."""
    now = timezone.now()
    live_jobs = Job.objects.filter(status=JobStatus.RUNNING, cancel_requested=False).values("id")
    return (
        JobChunk.objects.filter(
            Q(status=ChunkStatus.PENDING) | Q(status=ChunkStatus.RUNNING, lease_expires_at__lt=now),
            id=chunk_id,
            job_id__in=live_jobs,
        ).update(
            status=ChunkStatus.RUNNING,
            worker=worker_id(),
            lease_expires_at=now + timedelta(seconds=lease_seconds()),
            attempts=F("attempts") + 1,
            members_done=0,
        )
        == 1
    )


def job_chunk_release(*, chunk_id: int) -> None:
    """Hand a chunk back (a transient error: the retried task, on any worker, claims it again)."""
    JobChunk.objects.filter(id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.PENDING, worker="", lease_expires_at=None
    )


def _chunk_submissions(submission_ids: list[int]) -> list[Submission]:
    """The chunk's submissions with their model files, in the chunk's order, read in two queries; still valid."""
    found = Submission.objects.prefetch_related("model_files").in_bulk(submission_ids)
    for submission_id in submission_ids:
        if submission_id not in found:
            raise JobInputError(
                f"Submission #{submission_id} was deleted after the job was created."
            )
        if found[submission_id].status != SubmissionStatus.VALID:
            raise JobInputError(
                f"Submission #{submission_id} is no longer valid ({found[submission_id].status})."
            )
    return [found[submission_id] for submission_id in submission_ids]


def _model_bytes(submission: Submission, *, privacy_level: str) -> list[tuple[str, bytes]]:
    files = []
    for model_file in job_model_files(submission=submission, privacy_level=privacy_level):
        try:
            files.append((model_file.original_name, artifact_read(model_file.stored_name)))
        except FileNotFoundError as error:
            raise JobInputError(
                f"Submission #{submission.id}: its model file '{model_file.original_name}' is "
                "missing from storage."
            ) from error
        if sha256_of(files[-1][1]) != model_file.sha256:
            raise JobInputError(
                f"Submission #{submission.id}: its model file '{model_file.original_name}' is corrupt "
                "(its content no longer matches the SHA-256 recorded at upload)."
            )
    return files


def _predict_chunk(
    submissions: list[Submission], features: np.ndarray, n_classes: int, job
) -> list[np.ndarray]:
    """Probabilities ``(n_models, n_rows, K)`` of every member of the chunk in its order (of the model files the job
    uses: market.jobs.selectors.job_model_files), each reading the one-hot ``features`` in its own view
    (market.feature_views), computed in one sandbox child per view."""
    public_dataset = job.public_dataset
    flat = [
        (submission.id, name, data)
        for submission in submissions
        for name, data in _model_bytes(submission, privacy_level=job.privacy_level)
    ]
    views = {
        submission.id: model_files_feature_view(submission.model_files.all())
        for submission in submissions
    }
    # One sandbox child per feature view, not per model file: each child is a fresh, resource-limited interpreter.
    outcomes = [None] * len(flat)
    for view in sorted(set(views.values())):
        positions = [
            position
            for position, (submission_id, _, _) in enumerate(flat)
            if views[submission_id] == view
        ]
        predicted = stored_models_predict(
            [flat[position][2] for position in positions],
            stored_features_in_view(features, public_dataset, view),
            n_classes=n_classes,
        )
        for position, outcome in zip(positions, predicted):
            outcomes[position] = outcome
    result: dict[int, list] = {submission.id: [] for submission in submissions}
    for (submission_id, name, _), outcome in zip(flat, outcomes):
        if outcome.error:
            raise JobInputError(
                f"Submission #{submission_id}: model file '{name}' failed at predict time: "
                f"{outcome.error}"
            )
        probabilities = outcome.probabilities
        if probabilities.shape != (len(features), n_classes) or not np.all(
            np.isfinite(probabilities)
        ):
            raise JobInputError(
                f"Submission #{submission_id}: model file '{name}' returned unusable predictions "
                f"(shape {probabilities.shape}, finite: {bool(np.all(np.isfinite(probabilities)))})."
            )
        result[submission_id].append(probabilities)
    return [np.stack(probabilities) for probabilities in result.values()]


@failing_on_unexpected("predicting a chunk of members")
def job_chunk_run(*, chunk_id: int) -> int | None:
    """Predict the public data and the evaluation split with every member of one chunk; store the partial sums.
    The job's id when this was its last chunk to finish (its fusion is now due), else None."""
    if not job_chunk_claim(chunk_id=chunk_id):
        job_id = JobChunk.objects.filter(id=chunk_id).values_list("job_id", flat=True).first()
        if job_id is not None:
            job_stop_if_cancelled(job_id=job_id)
        return None
    chunk = JobChunk.objects.select_related(
        "job__public_dataset", "job__evaluation_split", "job__federation"
    ).get(id=chunk_id)
    job = chunk.job
    # A chunk that waited in the queue may find the job's lease close to expiry: renew it before the work, so the
    # reaper does not re-queue a job whose chunks are running.
    lease_renew(job_id=job.id, chunk_id=None)
    if job_stop_if_cancelled(job_id=job.id):
        return None
    try:
        with lease_kept(job_id=job.id, chunk_id=chunk_id):
            artifact, member_metrics = _chunk_artifact(chunk, job)
    except JobInputError as error:
        job_end(job_id=job.id, status=JobStatus.FAILED, reason=str(error))
        return None
    if job_stop_if_cancelled(
        job_id=job.id
    ):  # cancelled while predicting: nothing of this chunk is recorded
        return None
    done = JobChunk.objects.filter(
        id=chunk_id, worker=worker_id(), status=ChunkStatus.RUNNING
    ).update(
        status=ChunkStatus.DONE,
        artifact_name=artifact,
        member_metrics=member_metrics,
        members_done=len(chunk.submission_ids),
        finished_at=timezone.now(),
    )
    if not done:  # the reaper handed this chunk to another worker meanwhile; its result wins
        return None
    chunk_sums = (
        JobChunk.objects.filter(job_id=job.id, status=ChunkStatus.DONE)
        .values("job_id")
        .annotate(total=Sum("members_done"))
        .values("total")
    )
    # Recounted from the done chunks, not incremented: a chunk run twice (its lease expired) counts once.
    Job.objects.filter(id=job.id).update(progress_done=Subquery(chunk_sums))
    job_log(
        job_id=job.id,
        message=f"Chunk {chunk.index + 1}: {len(chunk.submission_ids)} member(s) predicted.",
    )
    return job.id if _finalize_due(job.id) else None


def members_predicted(*, submission_ids: list[int], run) -> ChunkSignals:
    """The signals and evaluation probabilities of the listed members, predicted in the sandbox as one chunk of a
    job is. ``run`` is a job, or its pre-flight estimate (workers.runner.preflight, which has the same fields):
    its ``kind``, ``parameters``, ``federation``, ``public_dataset`` and ``evaluation_split``. JobInputError names
    what cannot be used."""
    try:
        public = arrays_from_npz_cached(run.public_dataset.features_file)["features"]
        evaluation = arrays_from_npz_cached(run.evaluation_split.data_file)
    except FileNotFoundError as error:
        raise JobInputError(
            "The federation's public data or evaluation split is missing from storage."
        ) from error
    submissions = _chunk_submissions(submission_ids)
    # The public rows and the evaluation split are predicted together: one sandbox child per view, not two.
    return chunk_signals_of(
        _predict_chunk(
            submissions, np.vstack([public, evaluation["features"]]), run.federation.n_classes, run
        ),
        member_ids=submission_ids,
        members=job_members(submissions=submissions, privacy_level=run.privacy_level),
        algorithm=algorithm_get(run.kind),
        n_public=len(public),
        params=run.parameters,
    )


def _chunk_artifact(chunk: JobChunk, job: Job) -> tuple[str, dict]:
    signals = members_predicted(submission_ids=chunk.submission_ids, run=job)
    members = job_members(
        submissions=_chunk_submissions(chunk.submission_ids), privacy_level=job.privacy_level
    )
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    n_classes = job.federation.n_classes
    metrics = {
        str(member_id): member_metrics(
            probabilities, evaluation["labels"], n_classes=n_classes, own_model=member.own_model
        )
        for member_id, member, probabilities in zip(
            chunk.submission_ids, members, signals.evaluation_probabilities
        )
    }
    name = artifact_save(
        name=f"jobs/{job.id}/chunks/{chunk.index}.npz",
        data=chunk_signals_to_npz(signals),
        stored_names=[],
    )
    return name, metrics


def _finalize_due(job_id: int) -> bool:
    """Whether every chunk is done while the job still predicts. Two chunks finishing together may both see it and
    both dispatch the fusion; its claim (:func:`workers.runner.finalize.job_finalize`) lets one of them run."""
    unfinished = JobChunk.objects.filter(job_id=OuterRef("pk")).exclude(status=ChunkStatus.DONE)
    return (
        Job.objects.filter(id=job_id, status=JobStatus.RUNNING, phase=JobPhase.PREDICTING)
        .filter(~Exists(unfinished))
        .exists()
    )
