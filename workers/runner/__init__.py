"""The worker side of a job: claim, fan out over chunks of members, fuse, evaluate, save; and the reaper.

The job row in PostgreSQL is the truth, not the broker, and the market owns it: every state change below is a
service of market.jobs (:mod:`market.jobs.lifecycle`, :mod:`market.jobs.chunks`, :mod:`market.jobs.leases`) and
every read a selector of :mod:`market.jobs.selectors`; this package only computes. Every step starts with a
conditional UPDATE that only one worker can win (a duplicate or redelivered message finds nothing to claim and
returns), holds a lease that a heartbeat thread renews, and checks ``cancel_requested`` between steps. The fan-out is a Celery
group of chunk tasks; each stores its partial signal sum and per-member data as an artifact in Django storage
(not in the broker), and the last chunk to finish says that the fusion is due. The periodic reaper re-queues jobs whose
lease expired (a worker killed mid-job) or fails them after ``ONEFOLD_JOB_MAX_ATTEMPTS``. The steps return what is
to run next; only the Celery task module (workers.tasks) dispatches it.

Steps: :func:`job_start` (claim, plan chunks) → :func:`job_chunk_run` per chunk →
:func:`job_finalize` (:mod:`.finalize`, which runs the fusion and the evaluation of :mod:`.fusing`); :func:`job_reap`
periodically (:mod:`.reaper`).
"""

from workers.runner.chunks import job_chunk_release, job_chunk_run, job_start
from workers.runner.finalize import job_finalize, job_finalize_release, job_finalize_safely
from workers.runner.lifecycle import JobInputError
from workers.runner.reaper import job_reap

__all__ = [
    "JobInputError",
    "job_chunk_release",
    "job_chunk_run",
    "job_finalize",
    "job_finalize_release",
    "job_finalize_safely",
    "job_reap",
    "job_start",
]
