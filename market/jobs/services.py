"""Writes on jobs: create (validated, budget reserved, queued on commit through the outbox), cancel, log.

The worker side (claim, chunks, fusion, reaper) is in :mod:`workers.runner`.
"""

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from datetime import UTC

from django.db import IntegrityError, transaction
from django.utils import timezone

from market.accounts.models import User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.budgets.selectors import budget_refusal_visible
from market.budgets.services import BudgetExceeded, budget_refusal_record
from market.errors import (
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    PermissionDenied,
)
from market.federations.models import EvaluationSplit, Federation, PrivacyLevel, PublicDataset
from market.federations.selectors import public_dataset_current
from market.jobs.advice import estimate_advice
from market.jobs.models import (
    EstimateStatus,
    Job,
    JobEstimate,
    JobIdempotencyKey,
    JobLogEntry,
    JobOutbox,
    JobStatus,
)
from market.jobs.parameters import job_parameters_validate, job_workload_check
from market.jobs.quality import estimate_verdict
from market.jobs.selectors import (
    SUBMISSION_LEVELS_FOR,
    job_estimate_latest_for,
    job_estimates_before_launch,
    job_launch_require_permission,
    job_members,
)
from market.jobs.spending import job_budget_charge, job_budget_release, job_budget_reserve
from market.outbox import outbox_add
from market.submissions.models import Submission, SubmissionStatus
from market.transient import retried_on_lock_conflict
from workers.privacy.reports import JobPrivacyReport, PrivacyReport


def job_log(*, job_id: int, message: str, level: str = "info") -> None:
    JobLogEntry.objects.create(job_id=job_id, message=message, level=level)


def _chosen_submissions(
    *, federation: Federation, privacy_level: str, submissions
) -> list[Submission]:
    usable_levels = SUBMISSION_LEVELS_FOR[privacy_level]
    if submissions == "all":
        chosen = list(
            Submission.objects.filter(
                federation=federation,
                organisation__federations=federation,  # members only: a removed member's stay out
                status=SubmissionStatus.VALID,
                privacy_level__in=usable_levels,
            ).order_by("id")
        )
        if not chosen:
            raise InvalidInput(
                f"'{federation.slug}' has no valid {privacy_level}-compatible submissions yet; "
                "wait for silos to upload and for validation to finish."
            )
        return chosen
    if (
        not isinstance(submissions, list)
        or not submissions
        or not all(isinstance(id, int) and not isinstance(id, bool) for id in submissions)
    ):
        raise InvalidInput('Give "submissions" as "all" or a non-empty list of submission ids.')
    if len(set(submissions)) != len(submissions):
        raise InvalidInput("A submission id is listed twice; list each submission once.")
    found = Submission.objects.filter(federation=federation, id__in=submissions).in_bulk()
    member_ids = set(federation.members.values_list("id", flat=True))
    for submission_id in submissions:
        submission = found.get(submission_id)
        if submission is None:
            raise InvalidInput(
                f"Submission #{submission_id} does not belong to '{federation.slug}'."
            )
        if submission.organisation_id not in member_ids:
            raise InvalidInput(
                f"Submission #{submission_id} is from an organisation that is no longer a member of "
                f"'{federation.slug}'; a removed member's submissions are kept but used in no new job."
            )
        if submission.status != SubmissionStatus.VALID:
            raise InvalidInput(
                f"Submission #{submission_id} is {submission.status}, not valid; only validated "
                "submissions can be fused."
            )
        if submission.privacy_level not in usable_levels:
            raise InvalidInput(
                f"Submission #{submission_id} was uploaded at {submission.privacy_level}; an "
                f"{privacy_level} job can use {', '.join(sorted(usable_levels))} submissions only."
            )
    return [found[submission_id] for submission_id in sorted(submissions)]


def _check_selectable(
    *,
    kind: str,
    parameters: dict,
    submissions: list[Submission],
    privacy_level: str,
    seed: int | None,
    n_public: int,
    n_classes: int,
) -> None:
    """The engine's own check of the members' declared metadata (e.g. CPFL needs label distributions), then that
    the settings can train a model within the market's work limit."""
    # Imported on use: the engines load torch (seconds), which a web process pays only once it needs a job kind.
    from workers.algorithms import algorithm_get

    members = job_members(submissions=submissions, privacy_level=privacy_level)
    try:
        selected = algorithm_get(kind).select(
            members, parameters, seed=seed or 0
        )  # refuses an empty selection
    except ValueError as error:
        raise InvalidInput(f"These submissions cannot be fused this way: {error}") from error
    job_workload_check(
        kind=kind,
        parameters=parameters,
        n_public=n_public,
        n_classes=n_classes,
        n_member_models=sum(members[index].n_models for index in selected),
    )


@dataclass(frozen=True)
class CheckedJobRequest:
    """A job request as :func:`job_request_check` resolved it: what a job (or its pre-flight estimate,
    market.jobs.preflight) is made of. ``seed`` is the one given, else a fresh random one."""

    parameters: dict
    submissions: list[Submission]
    seed: int
    public_dataset: PublicDataset
    evaluation_split: EvaluationSplit


def job_request_check(
    *,
    federation: Federation,
    kind: str,
    privacy_level: str,
    parameters: dict | None,
    submissions,
    seed: int | None,
) -> CheckedJobRequest:
    """Everything a job is checked for before it is stored, except who asks and the budgets: the level the federation
    allows, its public data and evaluation split, the seed, the parameters, the submissions and the engine's member
    rule and work limit. InvalidInput names the first problem."""
    if privacy_level not in federation.allowed_privacy_levels:
        raise InvalidInput(
            f"The federation allows privacy levels {', '.join(federation.allowed_privacy_levels)}, "
            f"not {privacy_level}."
        )
    public_dataset = public_dataset_current(federation=federation)
    evaluation_split = federation.evaluation_splits.first()
    if evaluation_split is None:
        raise InvalidInput(
            f"'{federation.slug}' has no evaluation split yet; an operator must upload one so "
            "that the platform can measure the global model."
        )
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63
    ):
        raise InvalidInput(f"The seed must be a whole number from 0 to 2⁶³−1, not {seed!r}.")
    chosen = _chosen_submissions(
        federation=federation, privacy_level=privacy_level, submissions=submissions
    )
    validated = job_parameters_validate(
        kind=kind,
        privacy_level=privacy_level,
        parameters=parameters,
        federation=federation,
        n_public=public_dataset.n_rows,
        n_submissions=len(chosen),
    )
    _check_selectable(
        kind=kind,
        parameters=validated,
        submissions=chosen,
        privacy_level=privacy_level,
        seed=seed,
        n_public=public_dataset.n_rows,
        n_classes=federation.n_classes,
    )
    return CheckedJobRequest(
        parameters=validated,
        submissions=chosen,
        seed=seed if seed is not None else int.from_bytes(os.urandom(7), "big"),
        public_dataset=public_dataset,
        evaluation_split=evaluation_split,
    )


class FailedEstimateRefusal(InvalidInput):
    """A launch whose pre-flight estimate failed, refused until the launcher names that estimate (issue 45)."""

    def __init__(self, estimate: JobEstimate):
        super().__init__(
            f"Pre-flight estimate #{estimate.id} of this job failed: {estimate.failure_reason} A job launched "
            "the same way would most likely fail too, after its budget was reserved. Fix what it names, or launch "
            f'anyway with "acknowledge_failed_estimate": {estimate.id}.',
            field="acknowledge_failed_estimate",
        )
        self.estimate_id = estimate.id


#: The most characters of the reason an operator gives for launching despite an estimate (as a publish override's).
MAX_LAUNCH_REASON = 2000


@dataclass(frozen=True)
class EstimateOverride:
    """An operator's written decision to launch although the request's latest pre-flight estimate expects its model
    to fail the publish gate (issue 43): the API's ``"launch_despite_estimate": {"estimate": id, "reason": ...}``."""

    estimate_id: int
    reason: str


def _launch_despite_example(estimate_id: int) -> str:
    return f'"launch_despite_estimate": {{"estimate": {estimate_id}, "reason": "<why you launch it anyway>"}}'


def _advised(estimate: JobEstimate) -> str:
    """The budget advisor's sentence on ``estimate`` (market.jobs.advice) followed by a space; "" where it has none."""
    advice = estimate_advice(
        result=estimate.result, class_labels=estimate.federation.class_labels or []
    )
    return f"{advice['statement']} " if advice else ""


class EstimateGateRefusal(InvalidInput):
    """A launch whose latest pre-flight estimate expects the model to fail the publish gate, refused until the
    launcher names that estimate with a written reason (issue 43, issue 40 item 4)."""

    def __init__(self, estimate: JobEstimate, failure: str):
        spend = (
            "spend the silos' privacy budget on"
            if estimate.privacy_level == "L1"
            else "run a job for"
        )
        super().__init__(
            f"Pre-flight estimate #{estimate.id} of this job expects its model to fail the publish gate: {failure} "
            f"Launching it would {spend} a model the market will not publish without an operator's "
            f"written override. {_advised(estimate)}Change the job and estimate it again (more queried rows or "
            "less noise where the budgets allow, another kind, or an L0 job), or launch anyway with "
            f"{_launch_despite_example(estimate.id)}; the reason is kept on the job and in the audit log.",
            field="launch_despite_estimate",
        )
        self.estimate_id = estimate.id


def _failed_estimate_check(*, latest: JobEstimate, acknowledged: int | None) -> None:
    if latest.status == EstimateStatus.FAILED and latest.id != acknowledged:
        raise FailedEstimateRefusal(latest)


def _launch_reason(*, estimate_id: int, override: EstimateOverride) -> str:
    reason = override.reason.strip()
    if not reason:
        raise InvalidInput(
            f"Write why you launch despite pre-flight estimate #{estimate_id}: "
            f"{_launch_despite_example(estimate_id)}. The reason is kept on the job and in the audit log.",
            field="launch_despite_estimate",
        )
    if len(reason) > MAX_LAUNCH_REASON:
        raise InvalidInput(
            f"The reason for launching despite the estimate must be at most {MAX_LAUNCH_REASON} characters, "
            f"not {len(reason)}.",
            field="launch_despite_estimate",
        )
    return reason


@dataclass(frozen=True)
class AnsweredEstimate:
    """A gate-failing estimate that a launch went ahead despite: the operator's ``reason`` and the publish gate's
    sentence (``gate``) as the estimate said it then, both recorded with the job."""

    estimate: JobEstimate
    reason: str
    gate: str


def _gate_estimate_check(
    *, latest: JobEstimate, override: EstimateOverride | None, class_labels: list
) -> AnsweredEstimate | None:
    """Refuse a launch after ``latest`` expects a model that fails the publish gate (the gate's own rule,
    market.jobs.quality) unless ``override`` names it with a reason; None when the estimate says nothing against."""
    if latest.status != EstimateStatus.SUCCEEDED:
        return None
    verdict = estimate_verdict(result=latest.result, class_labels=class_labels)
    if verdict.passes_gate:
        return None
    gate = verdict.gate_failure() or ""
    if override is None or override.estimate_id != latest.id:
        raise EstimateGateRefusal(latest, gate)
    reason = _launch_reason(estimate_id=latest.id, override=override)
    return AnsweredEstimate(estimate=latest, reason=reason, gate=gate)


def _latest_estimate_check(
    *,
    federation: Federation,
    kind: str,
    privacy_level: str,
    checked: CheckedJobRequest,
    acknowledge_failed_estimate: int | None,
    launch_despite_estimate: EstimateOverride | None,
) -> AnsweredEstimate | None:
    """Refuse a launch that the latest pre-flight estimate of the same request speaks against and the request does
    not answer (:class:`FailedEstimateRefusal`, :class:`EstimateGateRefusal`); what ``launch_despite_estimate``
    answered, if anything."""
    latest = job_estimate_latest_for(
        federation=federation,
        kind=kind,
        privacy_level=privacy_level,
        parameters=checked.parameters,
        submission_ids=[submission.id for submission in checked.submissions],
        public_dataset_id=checked.public_dataset.id,
        evaluation_split_id=checked.evaluation_split.id,
    )
    if latest is None:
        return None
    _failed_estimate_check(latest=latest, acknowledged=acknowledge_failed_estimate)
    return _gate_estimate_check(
        latest=latest,
        override=launch_despite_estimate,
        class_labels=federation.class_labels or [],
    )


@retried_on_lock_conflict
def job_create(
    *,
    federation: Federation,
    kind: str,
    privacy_level: str,
    parameters: dict | None,
    submissions,
    seed: int | None,
    requested_by: User,
    request=None,
    stored_with_job: Callable[[Job], object] | None = None,
    acknowledge_failed_estimate: int | None = None,
    launch_despite_estimate: EstimateOverride | None = None,
) -> Job:
    """Validate and store a job, reserve its L1 privacy budget, and queue it when the transaction commits.
    ``stored_with_job`` writes what must commit or roll back with the job (its idempotency key);
    ``acknowledge_failed_estimate``: the id of this request's failed pre-flight estimate, which the launcher has
    seen (without it such a launch is refused: :class:`FailedEstimateRefusal`); ``launch_despite_estimate``: the
    operator's answer to this request's latest estimate when it expects the model to fail the publish gate
    (without it: :class:`EstimateGateRefusal`), kept on the job and audited. Run again when the database broke a
    deadlock with another transaction on the same budgets."""
    try:
        job_launch_require_permission(federation=federation, user=requested_by)
        checked = job_request_check(
            federation=federation,
            kind=kind,
            privacy_level=privacy_level,
            parameters=parameters,
            submissions=submissions,
            seed=seed,
        )
        answered = _latest_estimate_check(
            federation=federation,
            kind=kind,
            privacy_level=privacy_level,
            checked=checked,
            acknowledge_failed_estimate=acknowledge_failed_estimate,
            launch_despite_estimate=launch_despite_estimate,
        )
        with transaction.atomic():
            job = Job.objects.create(
                federation=federation,
                kind=kind,
                privacy_level=privacy_level,
                parameters=checked.parameters,
                seed=checked.seed,
                public_dataset=checked.public_dataset,
                evaluation_split=checked.evaluation_split,
                requested_by=requested_by,
                requesting_organisation=requested_by.organisation,
                progress_total=len(checked.submissions),
                estimates_before_launch=job_estimates_before_launch(federation=federation),
                launched_despite_estimate=answered.estimate if answered else None,
                launch_reason=answered.reason if answered else "",
            )
            chosen = checked.submissions
            job.submissions.set(chosen)
            if privacy_level == PrivacyLevel.L1:
                job_budget_reserve(job=job, actor=requested_by)
            job_log(
                job_id=job.id,
                message=f"Created by {requested_by.username} with {len(chosen)} submission(s).",
            )
            audit_record(
                action="job.created",
                actor=requested_by,
                organisation=requested_by.organisation,
                target=job,
                request=request,
                details={
                    "kind": kind,
                    "privacy_level": privacy_level,
                    "submissions": [s.id for s in chosen],
                },
            )
            if answered is not None:
                _audit_launch_despite(
                    job=job, answered=answered, actor=requested_by, request=request
                )
            if stored_with_job is not None:
                stored_with_job(job)
            job_enqueue(job=job)
    except DomainError as error:
        if isinstance(error, BudgetExceeded):
            budget_refusal_record(
                error=error,
                actor=requested_by,
                target=federation,
                request=request,
                details={"job_kind": kind},
            )
        audit_record(
            action="job.refused",
            outcome=AuditOutcome.REFUSED,
            actor=requested_by,
            organisation=requested_by.organisation,
            target=federation,
            request=request,
            details={"kind": kind, "privacy_level": privacy_level, "reason": str(error)},
        )
        if isinstance(
            error, BudgetExceeded
        ):  # other silos' remainders are not the requester's to read
            raise budget_refusal_visible(error=error, user=requested_by) from None
        raise
    return job


def _audit_launch_despite(*, job: Job, answered: AnsweredEstimate, actor: User, request) -> None:
    audit_record(
        action="job.launched_despite_estimate",
        actor=actor,
        organisation=actor.organisation,
        target=job,
        request=request,
        details={
            "estimate": answered.estimate.id,
            "reason": answered.reason,
            "gate": answered.gate,
        },
    )


@dataclass(frozen=True)
class JobCreation:
    job: Job
    replayed: bool  # True when an earlier request with the same Idempotency-Key made this job


def _earlier_job(*, requested_by: User, idempotency_key: str, request_sha256: str) -> Job | None:
    earlier = (
        JobIdempotencyKey.objects.filter(requested_by=requested_by, key=idempotency_key)
        .select_related("job")
        .first()
    )
    if earlier is not None and earlier.request_sha256 != request_sha256:
        job = earlier.job
        raise IdempotencyKeyReused(
            f"The Idempotency-Key {idempotency_key!r} was already used for another request "
            f"(job #{job.id}, {job.get_kind_display()} at {job.privacy_level} in {job.federation.name}, "
            f"launched {job.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC); send a new key for a new job."
        )
    return earlier.job if earlier is not None else None


def _json_value(value) -> object:
    """A request field JSON does not write itself, as the request's hash reads it: a dataclass by its fields."""
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else str(value)


def job_create_once(
    *,
    idempotency_key: str | None,
    federation: Federation,
    requested_by: User,
    request=None,
    **job_fields,
) -> JobCreation:
    """:func:`job_create`, at most once per ``idempotency_key``: a repeated key with the same federation and job
    fields returns the first job (nothing reserved again); with a different request it is refused (422)."""
    if idempotency_key is None:
        return JobCreation(
            job=job_create(
                federation=federation, requested_by=requested_by, request=request, **job_fields
            ),
            replayed=False,
        )
    if not 1 <= len(idempotency_key) <= 200:
        raise InvalidInput("The Idempotency-Key header must be 1 to 200 characters long.")
    request_sha256 = hashlib.sha256(
        json.dumps(
            {"federation": federation.slug, **job_fields}, sort_keys=True, default=_json_value
        ).encode()
    ).hexdigest()
    earlier = dict(
        requested_by=requested_by, idempotency_key=idempotency_key, request_sha256=request_sha256
    )
    if (job := _earlier_job(**earlier)) is not None:
        return JobCreation(job=job, replayed=True)
    try:
        job = job_create(
            federation=federation,
            requested_by=requested_by,
            request=request,
            **job_fields,
            stored_with_job=lambda job: JobIdempotencyKey.objects.create(
                requested_by=requested_by,
                key=idempotency_key,
                request_sha256=request_sha256,
                job=job,
            ),
        )
    except (
        IntegrityError
    ):  # the same key arrived twice at once: the first one's job stands, this one rolled back
        if (job := _earlier_job(**earlier)) is None:
            raise
        return JobCreation(job=job, replayed=True)
    return JobCreation(job=job, replayed=False)


def job_enqueue(*, job: Job) -> None:
    """Queue the job's start through the outbox: published when the caller's transaction commits, or swept later."""
    outbox_add(JobOutbox(job=job))


#: What each silo reads on its ledger line when an L1 job is settled (issue 45).
REFUNDED = (
    "Refunded: the job ended ({status}) before anything derived from its votes left the worker, so nothing "
    "was released and nothing is charged."
)
CHARGED_AFTER_RELEASE = (
    "Charged: the job failed after its release step (its report lines were published), so what it released is "
    "spent."
)
CHARGED_FOR_MODEL = "Charged: the job released global model #{global_model}."


def job_release(*, job: Job, lines: Sequence[str] = ()) -> None:
    """The release step of a job (issue 45): from here on something derived from its (noisy) votes leaves the
    worker, so a failure after it charges an L1 job. Marks the job released and writes ``lines`` (the report
    lines the worker held back: trained rows, classes, chosen fusion, accuracy) to its log, together; a retry
    that releases again writes nothing twice. Everything before it (fusion, export, evaluation) is held in the
    worker, and a job that fails or is cancelled there is refunded (:func:`job_settle_budget`)."""
    with transaction.atomic():
        if Job.objects.filter(id=job.id, released_at__isnull=True).update(
            released_at=timezone.now()
        ):
            for line in lines:
                job_log(job_id=job.id, message=line)
    job.released_at = Job.objects.values_list("released_at", flat=True).get(id=job.id)


def job_settle_budget(*, job: Job) -> None:
    """After a failure or cancellation: release the reservation if the job ended before its release step
    (:func:`job_release`; noise may have been drawn, but nothing derived from it left the worker), else charge the
    bound reserved for it. Each silo's ledger line says which and why. Call inside the transaction that ends the
    job."""
    if job.privacy_level != PrivacyLevel.L1:
        return
    if job.released_at is None:
        job_budget_release(job=job, reason=REFUNDED.format(status=job.status))
    else:
        bound = PrivacyReport(**job.privacy_bound) if job.privacy_bound else None
        job_budget_charge(
            job=job,
            privacy_report=JobPrivacyReport(level=PrivacyLevel.L1, data_independent=bound),
            reason=CHARGED_AFTER_RELEASE,
        )


def job_cancel(*, job: Job, user: User, request=None) -> Job:
    """Cancel a queued job at once; ask a running one to stop (its worker stops at the next check)."""
    if not (user.is_operator or user.id == job.requested_by_id):
        raise PermissionDenied("Only operators and the person who launched a job may cancel it.")
    with transaction.atomic():
        job = Job.objects.select_for_update().get(id=job.id)
        if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
            raise Conflict(f"Job #{job.id} already {job.status}; there is nothing to cancel.")
        job.cancel_requested = True
        fields = ["cancel_requested"]
        if job.status == JobStatus.QUEUED:
            job.status, job.finished_at = JobStatus.CANCELLED, timezone.now()
            fields += ["status", "finished_at"]
            job_settle_budget(job=job)
        job.save(update_fields=fields)
        job_log(
            job_id=job.id,
            message=f"Cancellation requested by {user.username}."
            if job.status == JobStatus.RUNNING
            else f"Cancelled by {user.username} before it started.",
        )
        audit_record(
            action="job.cancelled",
            actor=user,
            organisation=user.organisation,
            target=job,
            request=request,
            details={"status_when_cancelled": job.status},
        )
    return job
