"""The chunks of a running job's members: planned once, claimed by one worker at a time, handed back, and marked
done with their stored partial result. The worker side (workers.runner) predicts them; this module writes their
rows, each change a conditional UPDATE that only the worker holding the chunk can win."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Q, Subquery, Sum
from django.utils import timezone

from market.jobs.leases import lease_expiry
from market.jobs.models import ChunkStatus, Job, JobChunk, JobStatus


def job_chunks_plan(*, job: Job, submission_ids: list[int], size: int) -> list[JobChunk]:
    """Split the selected members into chunks of ``size`` (once) and set the job's progress total; the chunks."""
    with transaction.atomic():
        # A claim re-queued while this one was still planning (its lease expired under load) plans the same chunks
        # from the same seed; whichever commits second keeps the first's rows.
        JobChunk.objects.bulk_create(
            [
                JobChunk(job=job, index=index, submission_ids=submission_ids[start : start + size])
                for index, start in enumerate(range(0, len(submission_ids), size))
            ],
            ignore_conflicts=True,
        )
        Job.objects.filter(id=job.id).update(progress_total=len(submission_ids), progress_done=0)
    return list(job.chunks.all())


def job_chunk_ids_to_run(*, chunks: list[JobChunk]) -> list[int]:
    """The ids of ``chunks`` not done yet (none: every chunk is done and the fusion is due)."""
    return [chunk.id for chunk in chunks if chunk.status != ChunkStatus.DONE]


def job_chunk_claim(*, chunk_id: int, worker: str) -> bool:
    """Claim a pending chunk (or one whose lease expired) of a live job for ``worker``; False if another won.

    The status conditions sit on the updated row itself, so PostgreSQL re-checks them after waiting for a
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
            worker=worker,
            lease_expires_at=lease_expiry(now=now),
            attempts=F("attempts") + 1,
            members_done=0,
        )
        == 1
    )


def job_chunk_release(*, chunk_id: int, worker: str) -> None:
    """Hand a chunk back (a transient error: the retried task, on any worker, claims it again)."""
    JobChunk.objects.filter(id=chunk_id, worker=worker, status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.PENDING, worker="", lease_expires_at=None
    )


def job_chunks_requeue_running(*, job: Job) -> None:
    """A dead worker's running chunks go back; done chunks stay done, so the next claim predicts the rest."""
    JobChunk.objects.filter(job=job, status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.PENDING, worker="", lease_expires_at=None
    )


def job_chunk_done(
    *, chunk: JobChunk, worker: str, artifact_name: str, member_metrics: dict
) -> bool:
    """Record a chunk's stored result and recount its job's progress; False if ``worker`` no longer holds it (the
    reaper handed it to another worker meanwhile, whose result wins)."""
    done = JobChunk.objects.filter(id=chunk.id, worker=worker, status=ChunkStatus.RUNNING).update(
        status=ChunkStatus.DONE,
        artifact_name=artifact_name,
        member_metrics=member_metrics,
        members_done=len(chunk.submission_ids),
        finished_at=timezone.now(),
    )
    if not done:
        return False
    chunk_sums = (
        JobChunk.objects.filter(job_id=chunk.job_id, status=ChunkStatus.DONE)
        .values("job_id")
        .annotate(total=Sum("members_done"))
        .values("total")
    )
    # Recounted from the done chunks, not incremented: a chunk run twice (its lease expired) counts once.
    Job.objects.filter(id=chunk.job_id).update(progress_done=Subquery(chunk_sums))
    return True
