"""Celery tasks: thin; each takes an id and calls one market service."""

from workers.celery_app import app


@app.task(name="onefold.submission_validate")
def submission_validate_task(submission_id: int) -> None:
    from market.submissions.services import submission_validate

    submission_validate(submission_id=submission_id)
