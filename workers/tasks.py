"""Celery tasks: the one module that knows both the market's services and Celery. Each task takes an id, calls
one market step, and chains what that step says is next (a group of chunks, the fusion); the steps themselves
know nothing of Celery.

The market's modules are imported inside the tasks: this module is imported while Celery (and Django, through
market.jobs.apps) is still loading, before Django's apps are ready."""

from celery import group

from market.transient import TRANSIENT_ERRORS
from workers.celery_app import app

RETRY = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": 5,
    "acks_late": True,
}


# --- background work arrives through the outbox (market.outbox); every task claims its row first, so a
# duplicate delivery does nothing ---


@app.task(name="onefold.outbox_sweep", acks_late=True)
def outbox_sweep_task() -> int:
    from django.conf import settings

    from market.outbox import outbox_sweep

    return outbox_sweep(older_than_seconds=settings.ONEFOLD_JOB_OUTBOX_GRACE_SECONDS)


@app.task(name="onefold.submission_validate", **RETRY)
def submission_validate_task(submission_id: int) -> None:
    from market.submissions.validation import submission_validation_release
    from workers.submission_validation import submission_validate

    try:
        submission_validate(submission_id=submission_id)
    except TRANSIENT_ERRORS:
        submission_validation_release(submission_id=submission_id)
        raise


@app.task(name="onefold.submission_reap", acks_late=True)
def submission_reap_task() -> int:
    from market.submissions.validation import submission_reap

    return submission_reap()


@app.task(name="onefold.webhook_deliver", **RETRY)
def webhook_deliver_task(delivery_id: int) -> bool | None:
    from market.webhooks.delivery import webhook_deliver

    return webhook_deliver(delivery_id=delivery_id)


@app.task(name="onefold.webhook_dispatch", **RETRY)
def webhook_dispatch_task(dispatch_id: int) -> int:
    from market.webhooks.dispatch import webhook_dispatch

    return webhook_dispatch(dispatch_id=dispatch_id)


@app.task(name="onefold.webhook_reap", acks_late=True)
def webhook_reap_task() -> int:
    from django.conf import settings

    from market.webhooks.delivery import webhook_reap

    return webhook_reap(older_than_seconds=settings.ONEFOLD_JOB_REPUBLISH_SECONDS)


# --- aggregation jobs (workers.runner): start → a group of chunks → the last chunk queues the fusion ---


@app.task(name="onefold.job_start", **RETRY)
def job_start_task(job_id: int) -> None:
    from workers.runner import job_start

    chunk_ids = job_start(job_id=job_id)
    if chunk_ids is None:  # another worker claimed the job, or it failed
        return
    if chunk_ids:
        group(job_chunk_task.s(chunk_id) for chunk_id in chunk_ids).apply_async()
    else:  # a re-queued job whose chunks were all done: only the fusion is left
        job_finalize_task.delay(job_id)


@app.task(name="onefold.job_chunk", **RETRY)
def job_chunk_task(chunk_id: int) -> None:
    from workers.runner import job_chunk_release, job_chunk_run

    try:
        job_due_for_fusion = job_chunk_run(chunk_id=chunk_id)
    except TRANSIENT_ERRORS:
        job_chunk_release(chunk_id=chunk_id)
        raise
    if job_due_for_fusion is not None:
        job_finalize_task.delay(job_due_for_fusion)


@app.task(name="onefold.job_finalize", **RETRY)
def job_finalize_task(job_id: int) -> None:
    from workers.runner import job_finalize_release, job_finalize_safely

    try:
        job_finalize_safely(job_id=job_id)
    except TRANSIENT_ERRORS:
        job_finalize_release(job_id=job_id)
        raise


@app.task(name="onefold.job_reap", acks_late=True)
def job_reap_task() -> dict:
    from workers.runner import job_reap

    return job_reap()


@app.task(name="onefold.job_estimate", **RETRY)
def job_estimate_task(estimate_id: int) -> None:
    from workers.runner.preflight import job_estimate_release, job_estimate_run

    try:
        job_estimate_run(estimate_id=estimate_id)
    except TRANSIENT_ERRORS:
        job_estimate_release(estimate_id=estimate_id)
        raise


# --- federated distillation exchanges (workers.exchange_aggregation computes, market.exchanges records) ---


@app.task(name="onefold.exchange_round_aggregate", **RETRY)
def exchange_round_aggregate_task(exchange_round_id: int) -> None:
    from workers.exchange_aggregation import exchange_round_aggregate

    exchange_round_aggregate(exchange_round_id=exchange_round_id)


@app.task(name="onefold.exchange_reap", acks_late=True)
def exchange_reap_task() -> int:
    from market.exchanges.services import exchange_reap

    return exchange_reap()


# --- federated augmentation (workers.augmentation_training trains, market.augmentations records) ---


@app.task(name="onefold.augmentation_train", **RETRY)
def augmentation_train_task(augmentation_id: int) -> None:
    from workers.augmentation_training import augmentation_train

    augmentation_train(augmentation_id=augmentation_id)


@app.task(name="onefold.augmentation_reap", acks_late=True)
def augmentation_reap_task() -> dict:
    from market.augmentations.training import augmentation_reap

    return augmentation_reap()
