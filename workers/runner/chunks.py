"""Starting a job (claim, plan the chunks once, say which chunks are still to run) and running one chunk: every
member of it predicts the public data and the evaluation split in one sandbox child; the partial signal sum,
the members' signals and evaluation probabilities go to storage as one NPZ artifact. The Celery task module
(workers.tasks) dispatches what these steps return; they know nothing of Celery."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from market.feature_views import model_files_feature_view, stored_features_in_view
from market.jobs import chunks as chunk_services
from market.jobs.chunks import (
    job_chunk_claim,
    job_chunk_done,
    job_chunk_ids_to_run,
    job_chunks_plan,
)
from market.jobs.leases import job_lease_renew
from market.jobs.lifecycle import job_claim, job_end_if_cancelled, job_fail, job_stage_set
from market.jobs.selectors import (
    job_chunk_for_run,
    job_chunk_job_id,
    job_chunks_in_order,
    job_fusion_due,
    job_members,
    job_model_files,
    job_submissions_in_order,
    own_model_files_count,
    own_models_used,
    submission_usable,
    submissions_with_model_files,
)
from market.jobs.services import job_log
from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz_cached, artifact_read, artifact_save, sha256_of
from workers.algorithms import algorithm_get
from workers.jobs.chunks import ChunkSignals, chunk_signals_of, chunk_signals_to_npz
from workers.metrics import member_metrics
from workers.runner.leases import lease_kept, worker_id
from workers.runner.lifecycle import JobInputError, failing_on_unexpected

# Row types for annotations only: rows reach the runner through market.jobs' selectors and services.
if TYPE_CHECKING:
    from market.jobs.models import Job, JobChunk
    from market.submissions.models import Submission


@failing_on_unexpected("starting")
def job_start(*, job_id: int) -> list[int] | None:
    """Claim a queued job and split its members into chunks (once): the ids of the chunks still to run (empty when
    every chunk is done and the fusion is due), or None when this worker has nothing to dispatch (another one
    claimed the job, or the job failed)."""
    job = job_claim(job_id=job_id, worker=worker_id())
    if job is None:
        return None
    try:
        chunks = _planned_chunks(job)
    except JobInputError as error:
        job_fail(job_id=job_id, reason=str(error))
        return None
    job_stage_set(job_id=job_id, stage="predicting")
    return job_chunk_ids_to_run(chunks=chunks)


def _planned_chunks(job: Job) -> list[JobChunk]:
    existing = job_chunks_in_order(job=job)
    if existing:  # a re-claimed job keeps its plan, so the chunks a dead worker finished are not predicted again
        return existing
    submissions = job_submissions_in_order(job=job)
    members = job_members(submissions=submissions, privacy_level=job.privacy_level)
    try:
        selected = algorithm_get(job.kind).select(members, job.parameters, seed=job.seed)
    except ValueError as error:
        raise JobInputError(f"The members could not be selected: {error}") from error
    ids = [submissions[index].id for index in selected]
    chunks = job_chunks_plan(
        job=job, submission_ids=ids, size=max(1, int(settings.ONEFOLD_JOB_CHUNK_SIZE))
    )
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
    carrying = own_model_files_count(submissions=submissions)
    if not carrying:
        return None
    return (
        f"{carrying} submission(s) carry their silo's own model, which this {job.privacy_level} job does not use: "
        "an own model is trained without noise, so only L0 jobs use it. Their FedKT students vote, and their "
        "silo baselines are their students'."
    )


def job_chunk_release(*, chunk_id: int) -> None:
    """Hand a chunk this worker holds back (a transient error: the retried task, on any worker, claims it again)."""
    chunk_services.job_chunk_release(chunk_id=chunk_id, worker=worker_id())


def _chunk_submissions(submission_ids: list[int]) -> list[Submission]:
    """The chunk's submissions with their model files, in the chunk's order, read in two queries; still valid."""
    found = submissions_with_model_files(submission_ids=submission_ids)
    for submission_id in submission_ids:
        if submission_id not in found:
            raise JobInputError(
                f"Submission #{submission_id} was deleted after the job was created."
            )
        if not submission_usable(submission=found[submission_id]):
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
    if not job_chunk_claim(chunk_id=chunk_id, worker=worker_id()):
        job_id = job_chunk_job_id(chunk_id=chunk_id)
        if job_id is not None:
            job_end_if_cancelled(job_id=job_id)
        return None
    chunk = job_chunk_for_run(chunk_id=chunk_id)
    job = chunk.job
    # A chunk that waited in the queue may find the job's lease close to expiry: renew it before the work, so the
    # reaper does not re-queue a job whose chunks are running.
    job_lease_renew(job_id=job.id, chunk_id=None, worker=worker_id())
    if job_end_if_cancelled(job_id=job.id):
        return None
    try:
        with lease_kept(job_id=job.id, chunk_id=chunk_id):
            artifact, member_metrics = _chunk_artifact(chunk, job)
    except JobInputError as error:
        job_fail(job_id=job.id, reason=str(error))
        return None
    if job_end_if_cancelled(
        job_id=job.id
    ):  # cancelled while predicting: nothing of this chunk is recorded
        return None
    if not job_chunk_done(
        chunk=chunk, worker=worker_id(), artifact_name=artifact, member_metrics=member_metrics
    ):  # the reaper handed this chunk to another worker meanwhile; its result wins
        return None
    job_log(
        job_id=job.id,
        message=f"Chunk {chunk.index + 1}: {len(chunk.submission_ids)} member(s) predicted.",
    )
    return job.id if job_fusion_due(job_id=job.id) else None


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
