"""Reads on jobs and global models, with who may see what."""

from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from market.accounts.models import User
from market.errors import NotFound, PermissionDenied
from market.federations.models import Federation, PrivacyLevel
from market.jobs.models import (
    ChunkStatus,
    GlobalModel,
    Job,
    JobChunk,
    JobEstimate,
    JobPhase,
    JobStatus,
)
from market.outbox import outbox_published_long_ago
from market.submissions.models import OWN_MODEL_ROLE, ModelFile, Submission, SubmissionStatus

STAGE_PERCENT = {"fusing": 85, "evaluating": 92, "saving": 97, "done": 100}
PREDICTING_SHARE = 80  # percent of a job's progress bar the members' predictions fill


#: Which submission levels a job of each level may use: a silo that asked for server noise (L1) is never fused
#: without it, and L2 students are only used by L2 jobs (their ε was charged at upload).
SUBMISSION_LEVELS_FOR = {
    PrivacyLevel.L0: {PrivacyLevel.L0},
    PrivacyLevel.L1: {PrivacyLevel.L0, PrivacyLevel.L1},
    PrivacyLevel.L2: {PrivacyLevel.L2},
}


def job_levels_available(*, federation: Federation) -> list[tuple[str, str]]:
    """Each level the federation allows, with why a job there cannot run now ("" where it can): it has no valid
    member submission at a level such a job may use. The launcher greys such a level out with the sentence."""
    uploaded = set(
        Submission.objects.filter(
            federation=federation,
            organisation__federations=federation,
            status=SubmissionStatus.VALID,
        )
        .values_list("privacy_level", flat=True)
        .distinct()
    )
    return [
        (
            level,
            ""
            if uploaded & SUBMISSION_LEVELS_FOR[level]
            else f"no valid {' or '.join(sorted(SUBMISSION_LEVELS_FOR[level]))} submissions yet"
            + (f" (the silos uploaded at {', '.join(sorted(uploaded))})" if uploaded else ""),
        )
        for level in federation.allowed_privacy_levels
    ]


def job_list(*, user: User, federation_slug: str | None = None) -> QuerySet[Job]:
    """Operators see every job; others the jobs their organisation launched or that used its submissions."""
    jobs = Job.objects.select_related("federation", "requested_by", "global_model")
    if not user.is_operator:
        jobs = jobs.filter(
            Q(requesting_organisation_id=user.organisation_id)
            | Q(submissions__organisation_id=user.organisation_id)
        ).distinct()
    if federation_slug:
        jobs = jobs.filter(federation__slug=federation_slug)
    return jobs


def job_counts(*, user: User) -> dict[str, int]:
    """How many of the jobs the user may see are under way (queued or running) and how many failed."""
    jobs = job_list(user=user)
    return {
        "running_count": jobs.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).count(),
        "failed_count": jobs.filter(status=JobStatus.FAILED).count(),
    }


def global_model_families() -> QuerySet:
    """The model families of the global models built so far, once each: the choices of a filter by family."""
    return GlobalModel.objects.order_by().values_list("model_family", flat=True).distinct()


def job_launch_require_permission(*, federation: Federation, user: User) -> None:
    """Who may launch a job (the API, the launcher page and its price): operators, and buyer organisations
    where the federation lets buyers launch jobs."""
    if user.is_operator:
        return
    organisation = user.organisation
    if federation.buyers_may_launch_jobs and organisation is not None and organisation.is_buyer:
        return
    if federation.buyers_may_launch_jobs:
        raise PermissionDenied(
            "Only operators and buyer organisations may launch jobs in this federation."
        )
    raise PermissionDenied(f"Only operators may launch jobs in '{federation.slug}'.")


def job_get(*, job_id: int, user: User) -> Job:
    job = job_list(user=user).filter(id=job_id).first()
    if job is None:
        raise NotFound(f"There is no job #{job_id} you may see.")
    return job


def job_progress(job: Job) -> dict:
    """{"stage", "done", "total", "percent"}; percent covers the whole job, predictions filling the first 80 %."""
    if job.status == JobStatus.SUCCEEDED:
        percent = 100
    elif job.progress_stage in STAGE_PERCENT:
        percent = STAGE_PERCENT[job.progress_stage]
    elif job.progress_total:
        percent = round(PREDICTING_SHARE * job.progress_done / job.progress_total)
    else:
        percent = 0
    stage = job.progress_stage or (
        "waiting for a worker" if job.status == JobStatus.QUEUED else job.status
    )
    return {
        "stage": stage,
        "done": job.progress_done,
        "total": job.progress_total,
        "percent": percent,
    }


def job_log_lines(job: Job) -> list[dict]:
    return [
        {"at": entry.created_at, "level": entry.level, "message": entry.message}
        for entry in job.log_entries.all()
    ]


def global_model_get(*, global_model_id: int, user: User) -> GlobalModel:
    """A global model the user may see: its job's (job_list's rule: operators, the launching organisation, the
    silos that took part) or one the user's organisation bought. What each of them sees of it is
    market.jobs.visibility's; anyone else gets the same 404 as for a model that does not exist."""
    model = (
        GlobalModel.objects.select_related("job", "federation")
        .prefetch_related("files")
        .filter(id=global_model_id)
        .first()
    )
    if model is None or not (
        job_list(user=user).filter(id=model.job_id).exists()
        or _bought(global_model=model, user=user)
    ):
        raise NotFound(f"There is no global model #{global_model_id} you may see.")
    return model


def _bought(*, global_model: GlobalModel, user: User) -> bool:
    """The user's organisation holds an entitlement to the model (market.commerce: it bought it)."""
    return (
        user.organisation_id is not None
        and global_model.entitlements.filter(organisation_id=user.organisation_id).exists()
    )


def own_models_used(*, privacy_level: str) -> bool:
    """Whether a job of ``privacy_level`` uses the silos' own models: at L0 only. An own model is trained on all of a
    silo's rows without noise, so an L1 job (server noise on the students' votes, priced per student) leaves it out
    rather than release it unaccounted; L2 submissions cannot carry one (market.submissions.services)."""
    return privacy_level == PrivacyLevel.L0


def server_noise_used(*, privacy_level: str) -> bool:
    """Whether a job of ``privacy_level`` adds the server's noise to the members' votes (L1): the one level whose
    fusion draws noise, reports an analysed ε and charges the silos' budgets when it releases its model."""
    return privacy_level == PrivacyLevel.L1


def party_noise_used(*, privacy_level: str) -> bool:
    """Whether a job of ``privacy_level`` fuses members that carry their silos' own noise (L2): its privacy report
    is the submissions' own."""
    return privacy_level == PrivacyLevel.L2


def job_model_files(*, submission: Submission, privacy_level: str) -> list[ModelFile]:
    """The model files of ``submission`` a job of ``privacy_level`` uses, in the engine's order: its students by
    position, then its own model (stored last) where :func:`own_models_used`."""
    used = own_models_used(privacy_level=privacy_level)
    return [
        model_file
        for model_file in submission.model_files.all()
        if used or (model_file.info or {}).get("role") != OWN_MODEL_ROLE
    ]


def job_members(*, submissions: list[Submission], privacy_level: str) -> list:
    """The submissions as the engine registry's members (what an engine may read of them), in the given order, as a
    job of ``privacy_level`` sees them (:func:`job_model_files`)."""
    # one query for every member's number of model files (a job may have thousands of members)
    counts = {
        submission_id: (n, own)
        for submission_id, n, own in ModelFile.objects.filter(
            submission_id__in=[submission.id for submission in submissions]
        )
        .values("submission_id")
        .annotate(n=Count("id"), own=Count("id", filter=Q(info__role=OWN_MODEL_ROLE)))
        .values_list("submission_id", "n", "own")
    }
    return [
        _member(submission, *counts.get(submission.id, (0, 0)), privacy_level=privacy_level)
        for submission in submissions
    ]


def _member(submission: Submission, n_models: int, n_own: int, *, privacy_level: str):
    # Imported on use: importing the engines' package loads torch (seconds), which a web process pays only once it
    # needs a job kind.
    from workers.algorithms.registry import Member

    used = own_models_used(privacy_level=privacy_level)
    return Member(
        key=str(submission.id),
        organisation=str(submission.organisation_id),
        n_examples=submission.n_local_examples,
        validation_score=submission.local_validation_score,
        n_models=n_models if used else n_models - n_own,
        label_distribution=tuple(submission.label_distribution)
        if submission.label_distribution
        else None,
        own_model=used and n_own > 0,
        teachers=submission.teachers,
        disjoint_partitions=submission.disjoint_partitions,
    )


def job_best_model_files(*, submission: Submission, privacy_level: str) -> list[ModelFile]:
    """The model files that make ``submission``'s best prediction in a job of ``privacy_level`` (its silo's own
    model where the job uses it, else its students: workers.algorithms.registry.member_model_positions, the rule
    its ensemble signal follows), read from its (prefetched) model files without another query."""
    from workers.algorithms.registry import member_model_positions  # loads torch: see _member

    files = list(submission.model_files.all())
    n_own = sum((model_file.info or {}).get("role") == OWN_MODEL_ROLE for model_file in files)
    used = job_model_files(submission=submission, privacy_level=privacy_level)
    member = _member(submission, len(files), n_own, privacy_level=privacy_level)
    return [used[position] for position in member_model_positions(member).best]


def job_estimate_latest_for(
    *,
    federation: Federation,
    kind: str,
    privacy_level: str,
    parameters: dict,
    submission_ids: list[int],
    public_dataset_id: int,
    evaluation_split_id: int,
) -> JobEstimate | None:
    """The latest pre-flight estimate of this job request (any seed or number of draws), or None: a launch after
    one that failed (issue 45) or that expects the model to fail the publish gate (issue 43) is refused until the
    operator has answered it (market.jobs.services.job_create)."""
    return (
        JobEstimate.objects.filter(
            federation=federation,
            kind=kind,
            privacy_level=privacy_level,
            parameters=parameters,
            submission_ids=submission_ids,
            public_dataset_id=public_dataset_id,
            evaluation_split_id=evaluation_split_id,
        )
        .order_by("-created_at", "-id")
        .first()
    )


def job_estimates_before_launch(*, federation: Federation) -> int:
    """Pre-flight estimates asked in ``federation`` since its latest job was launched (all of them when it has
    none): what a job launched now records as the estimates that preceded it. A replayed estimate (the same request
    read again) is one estimate."""
    estimates = JobEstimate.objects.filter(federation=federation)
    latest_job = Job.objects.filter(federation=federation).order_by("-created_at", "-id").first()
    if latest_job is not None:
        estimates = estimates.filter(created_at__gt=latest_job.created_at)
    return estimates.count()


# Reads of the worker side (workers.runner): the rows a running job's steps compute on.


def job_for_run(*, job_id: int) -> Job:
    """The job with what its fusion reads (federation, public data, evaluation split) in one query."""
    return Job.objects.select_related("federation", "public_dataset", "evaluation_split").get(
        id=job_id
    )


def job_chunk_for_run(*, chunk_id: int) -> JobChunk:
    """The chunk with its job and what predicting it reads, in one query."""
    return JobChunk.objects.select_related(
        "job__public_dataset", "job__evaluation_split", "job__federation"
    ).get(id=chunk_id)


def job_chunk_job_id(*, chunk_id: int) -> int | None:
    return JobChunk.objects.filter(id=chunk_id).values_list("job_id", flat=True).first()


def job_chunks_in_order(*, job: Job) -> list[JobChunk]:
    return list(job.chunks.order_by("index"))


def job_submissions_in_order(*, job: Job) -> list[Submission]:
    return list(job.submissions.order_by("id"))


def submissions_with_model_files(*, submission_ids: list[int]) -> dict[int, Submission]:
    """The submissions by id (those that still exist), their model files prefetched: two queries."""
    return Submission.objects.prefetch_related("model_files").in_bulk(submission_ids)


def own_model_files_count(*, submissions: list[Submission]) -> int:
    """How many of ``submissions``' model files are their silos' own models."""
    return ModelFile.objects.filter(submission__in=submissions, info__role=OWN_MODEL_ROLE).count()


def submission_usable(*, submission: Submission) -> bool:
    """Whether a job may still fuse ``submission``: it is valid (not withdrawn or invalidated since the launch)."""
    return submission.status == SubmissionStatus.VALID


def job_cancel_requested(*, job_id: int) -> bool:
    return Job.objects.filter(id=job_id, cancel_requested=True).exists()


def jobs_awaiting_fusion() -> QuerySet[Job]:
    """Running jobs that still predict and whose every chunk is done: their fusion is due."""
    unfinished = JobChunk.objects.filter(job_id=OuterRef("pk")).exclude(status=ChunkStatus.DONE)
    return Job.objects.filter(
        ~Exists(unfinished), status=JobStatus.RUNNING, phase=JobPhase.PREDICTING
    )


def job_fusion_due(*, job_id: int) -> bool:
    """Whether every chunk is done while the job still predicts. Two chunks finishing together may both see it and
    both dispatch the fusion; its claim (market.jobs.lifecycle.job_fusion_claim) lets one of them run."""
    return jobs_awaiting_fusion().filter(id=job_id).exists()


def jobs_lease_expired(*, now: datetime) -> QuerySet[Job]:
    """Running jobs whose worker's lease expired before ``now`` (the reaper's)."""
    return Job.objects.filter(status=JobStatus.RUNNING, lease_expires_at__lt=now)


def jobs_start_lost(*, older_than_seconds: float) -> QuerySet[Job]:
    """Queued jobs whose start message was published over ``older_than_seconds`` ago and that no worker took."""
    return outbox_published_long_ago(
        Job.objects.filter(status=JobStatus.QUEUED, cancel_requested=False),
        older_than_seconds=older_than_seconds,
    )
