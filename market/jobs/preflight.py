"""Pre-flight estimates of L1 and L2 jobs: what the private model would score against the baselines, known before
anything is launched or charged (issue 25 item 5).

An operator asks with the same request as a job (kind, level, parameters, submissions, seed); the request is checked
exactly as a job's is (:func:`market.jobs.services.job_request_check`), stored as a :class:`JobEstimate` and run by a
worker (:mod:`workers.runner.preflight`). The same request again, while its estimate is still running or once
it succeeded, reads that estimate instead of starting another (a reloaded form, a script that retries). Only
operators may ask for or read an estimate (:func:`market.jobs.visibility.estimate_visible`); anyone else is told
so, and nothing of it reaches silos or buyers.

Estimates are work for the workers (each draw is a fusion): a new estimate takes one of the operator's
``ONEFOLD_ESTIMATES_PER_HOUR`` in the federation and its draws from the federation's
``ONEFOLD_ESTIMATE_DRAWS_PER_HOUR``, both or neither (market.rate_limit); past either it is refused with
429, Retry-After and a sentence, and nothing is stored. Reading an estimate again (the same request) takes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from market.accounts.models import User
from market.errors import InvalidInput, NotFound, PermissionDenied, RateLimited
from market.federations.models import Federation, PrivacyLevel
from market.jobs.models import EstimateStatus, JobEstimate, JobEstimateOutbox
from market.jobs.services import job_request_check
from market.jobs.visibility import estimate_visible
from market.outbox import outbox_add
from market.rate_limit import Rate, rates_take

#: Simulated draws of an L1 job's noise when the request does not say, and the most it may ask for.
DEFAULT_DRAWS, MAX_DRAWS = 5, 10
#: A queued or running estimate older than this (seconds) is taken for lost (its worker died): the same request
#: starts a new one.
STALE_AFTER_SECONDS = 30 * 60
#: Percent of an estimate's progress the members' predictions fill; the fusions fill the rest.
PREDICTING_SHARE = 40
ESTIMATED_LEVELS = (PrivacyLevel.L1, PrivacyLevel.L2)
OPERATORS_ONLY = (
    "Only operators may ask for or read a pre-flight estimate: it is computed from every member's predictions, "
    "which under L1 only the server sees."
)


@dataclass(frozen=True)
class EstimateCreation:
    estimate: JobEstimate
    replayed: bool  # True when the same request's earlier estimate was returned, nothing started


def _draws(value, *, privacy_level: str) -> int:
    if privacy_level == PrivacyLevel.L2:
        return 1  # the members carry the silos' own noise: the fusion itself is the estimate
    if value is None:
        return DEFAULT_DRAWS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DRAWS:
        raise InvalidInput(
            f"'draws' must be a whole number from 1 to {MAX_DRAWS}, not {value!r}.", field="draws"
        )
    return value


def _request_sha256(*, federation: Federation, fields: dict) -> str:
    return hashlib.sha256(
        json.dumps({"federation": federation.slug, **fields}, sort_keys=True, default=str).encode()
    ).hexdigest()


def job_estimate_create(
    *,
    federation: Federation,
    kind: str,
    privacy_level: str,
    parameters: dict | None,
    submissions,
    seed: int | None,
    requested_by: User,
    draws: int | None = None,
) -> EstimateCreation:
    """Check the request as a job's, then queue its estimate on commit, or return the same request's estimate that is
    still running or succeeded. PermissionDenied for anyone but an operator; InvalidInput for L0 (it spends
    nothing: launch the job to see its model) and for whatever a job would be refused for."""
    if not estimate_visible(user=requested_by):
        raise PermissionDenied(OPERATORS_ONLY)
    if privacy_level not in ESTIMATED_LEVELS:
        raise InvalidInput(
            f"Pre-flight estimates are for L1 and L2 jobs, not {privacy_level!r}: an L0 job spends no privacy "
            "budget, so launch it and read its model's scores.",
            field="privacy_level",
        )
    n_draws = _draws(draws, privacy_level=privacy_level)
    checked = job_request_check(
        federation=federation,
        kind=kind,
        privacy_level=privacy_level,
        parameters=parameters,
        submissions=submissions,
        seed=seed,
    )
    submission_ids = [submission.id for submission in checked.submissions]
    request_sha256 = _request_sha256(
        federation=federation,
        fields={
            "kind": kind,
            "privacy_level": privacy_level,
            "parameters": checked.parameters,
            "submissions": submission_ids,
            "seed": seed,
            "draws": n_draws,
            "public_dataset": checked.public_dataset.id,
            "evaluation_split": checked.evaluation_split.id,
        },
    )
    with transaction.atomic():
        earlier = _reusable(federation=federation, request_sha256=request_sha256)
        if earlier is not None:
            return EstimateCreation(estimate=earlier, replayed=True)
        _estimate_rates_take(federation=federation, requested_by=requested_by, n_draws=n_draws)
        estimate = JobEstimate.objects.create(
            federation=federation,
            kind=kind,
            privacy_level=privacy_level,
            parameters=checked.parameters,
            seed=checked.seed,
            submission_ids=submission_ids,
            n_draws=n_draws,
            public_dataset=checked.public_dataset,
            evaluation_split=checked.evaluation_split,
            requested_by=requested_by,
            request_sha256=request_sha256,
            progress_total=len(submission_ids),
        )
        outbox_add(JobEstimateOutbox(estimate=estimate))
    return EstimateCreation(estimate=estimate, replayed=False)


def _estimate_rates_take(*, federation: Federation, requested_by: User, n_draws: int) -> None:
    """Take one of the operator's estimates in the federation and ``n_draws`` of the federation's draws this hour,
    or raise RateLimited saying when to ask again (nothing taken)."""
    per_hour = settings.ONEFOLD_ESTIMATES_PER_HOUR
    draws_per_hour = settings.ONEFOLD_ESTIMATE_DRAWS_PER_HOUR
    rates = [
        Rate(
            key=f"job-estimates:federation-{federation.id}:user-{requested_by.id}",
            count=per_hour,
            period_seconds=3600,
        ),
        Rate(
            key=f"job-estimate-draws:federation-{federation.id}",
            count=draws_per_hour,
            period_seconds=3600,
            weight=n_draws,
        ),
    ]
    wait = rates_take(cache=cache, rates=rates, now=time.time())
    if wait > 0:
        seconds = math.ceil(wait)
        raise RateLimited(
            f"Too many pre-flight estimates: at most {per_hour} an hour per operator in a federation, and "
            f"{draws_per_hour} simulated draws an hour for all of the federation's estimates. Ask again in "
            f"{seconds} s, or with fewer draws.",
            retry_after=seconds,
        )


def _reusable(*, federation: Federation, request_sha256: str) -> JobEstimate | None:
    fresh = timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
    return (
        JobEstimate.objects.select_for_update()
        .filter(federation=federation, request_sha256=request_sha256)
        .filter(
            Q(status=EstimateStatus.SUCCEEDED)
            | Q(status__in=(EstimateStatus.QUEUED, EstimateStatus.RUNNING), created_at__gte=fresh)
        )
        .order_by("-created_at", "-id")
        .first()
    )


def job_estimate_get(*, estimate_id: int, user: User) -> JobEstimate:
    """An estimate, for an operator; anyone else gets the 404 of an estimate that does not exist."""
    estimate = (
        JobEstimate.objects.select_related("federation", "requested_by")
        .filter(id=estimate_id)
        .first()
    )
    if estimate is None or not estimate_visible(user=user):
        raise NotFound(f"There is no pre-flight estimate #{estimate_id} you may see.")
    return estimate


def job_estimate_lost(estimate: JobEstimate) -> bool:
    """Whether a queued or running estimate is older than :data:`STALE_AFTER_SECONDS`: its worker is taken for lost,
    the launcher stops waiting for it, and the same request starts a new one."""
    return estimate.status in (
        EstimateStatus.QUEUED,
        EstimateStatus.RUNNING,
    ) and estimate.created_at < timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)


def job_estimate_progress(estimate: JobEstimate) -> dict:
    """{"stage", "done", "total", "percent"}: predictions fill the first :data:`PREDICTING_SHARE` percent, the
    fusions (the reference and each simulated draw) the rest; ``done``/``total`` count the step in progress."""
    if estimate.status == EstimateStatus.SUCCEEDED:
        percent = 100
    elif estimate.progress_stage.startswith("fusing"):
        percent = PREDICTING_SHARE + round(
            (100 - PREDICTING_SHARE) * estimate.progress_done / max(1, estimate.progress_total)
        )
    else:
        percent = round(PREDICTING_SHARE * estimate.progress_done / max(1, estimate.progress_total))
    stage = estimate.progress_stage or (
        "waiting for a worker" if estimate.status == EstimateStatus.QUEUED else estimate.status
    )
    if job_estimate_lost(estimate):
        stage = "lost: no worker finished it in time; ask for the estimate again"
    return {
        "stage": stage,
        "done": estimate.progress_done,
        "total": estimate.progress_total,
        "percent": percent,
    }


def job_estimate_claim(*, estimate_id: int, worker: str) -> bool:
    """queued → running, by one worker only (a conditional UPDATE); False where another worker won."""
    return (
        JobEstimate.objects.filter(id=estimate_id, status=EstimateStatus.QUEUED).update(
            status=EstimateStatus.RUNNING,
            worker=worker,
            attempts=F("attempts") + 1,
            started_at=timezone.now(),
            progress_stage="predicting",
            progress_done=0,
        )
        == 1
    )


def job_estimate_release(*, estimate_id: int, worker: str) -> None:
    """Hand a running estimate back after a transient error: the retried task claims it again from the start."""
    JobEstimate.objects.filter(id=estimate_id, status=EstimateStatus.RUNNING, worker=worker).update(
        status=EstimateStatus.QUEUED, worker="", progress_stage=""
    )


def job_estimate_progress_record(*, estimate_id: int, stage: str, done: int, total: int) -> None:
    """The running estimate's stage and how much of it is done (what the launcher's progress bar reads)."""
    JobEstimate.objects.filter(id=estimate_id).update(
        progress_stage=stage, progress_done=done, progress_total=total
    )


def job_estimate_end(*, estimate_id: int, result: dict | None = None, reason: str = "") -> None:
    """running → succeeded with its ``result``, or failed with the ``reason`` the operator reads (a reason given)."""
    status = EstimateStatus.FAILED if reason else EstimateStatus.SUCCEEDED
    JobEstimate.objects.filter(id=estimate_id, status=EstimateStatus.RUNNING).update(
        status=status,
        result=result,
        failure_reason=reason,
        finished_at=timezone.now(),
        progress_stage="done" if status == EstimateStatus.SUCCEEDED else "",
    )


def job_estimate_for_run(*, estimate_id: int) -> JobEstimate:
    """The estimate a worker computes, with its federation, public data and evaluation split."""
    return JobEstimate.objects.select_related(
        "federation", "public_dataset", "evaluation_split"
    ).get(id=estimate_id)
