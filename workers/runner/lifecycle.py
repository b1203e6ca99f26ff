"""How a job's steps stop: bad input fails the job at once, an unexpected error fails it with a readable reason,
and a cancel ends it between steps. Ending it (settling its budget, deleting its partial artifacts) is the
market's: :mod:`market.jobs.lifecycle`."""

from __future__ import annotations

import functools
import logging

from market.jobs.lifecycle import JobSuperseded, job_fail
from market.jobs.selectors import job_chunk_job_id
from market.transient import TRANSIENT_ERRORS

logger = logging.getLogger("workers.runner")


class JobInputError(Exception):
    """Bad input (a corrupt artifact, a deleted submission, a model that fails): the job fails at once."""


def failing_on_unexpected(step: str):
    """Unexpected errors (a bug, a time limit) fail the job with a readable reason instead of leaving it running;
    transient ones (database, broker) propagate so that the task retries with backoff."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*, job_id: int | None = None, chunk_id: int | None = None):
            try:
                return function(
                    **({"job_id": job_id} if chunk_id is None else {"chunk_id": chunk_id})
                )
            except TRANSIENT_ERRORS + (JobSuperseded,):
                # transient: the task retries the step; superseded: another worker owns the job now, and failing
                # it here would end that worker's run
                raise
            except Exception as error:
                logger.exception("Job step %s failed", step)
                owner = job_id if chunk_id is None else job_chunk_job_id(chunk_id=chunk_id)
                if owner is not None:
                    job_fail(
                        job_id=owner,
                        reason=f"Internal error while {step}: {type(error).__name__}: {error}",
                        step_error=True,
                    )
                return None

        return wrapper

    return decorate
