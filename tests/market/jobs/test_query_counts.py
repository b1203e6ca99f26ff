"""A job's database work does not grow with its members: the members' metadata and model files are read in a
fixed number of queries (a job may have thousands of members; one query per member cost a second per 500)."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from market.jobs.models import ChunkStatus, JobChunk
from market.jobs.selectors import job_members
from market.jobs.services import job_create
from tests.fixtures.jobs import FAST_FEDKT
from workers.runner import job_chunk_run, job_start


def test_job_members_count_every_members_model_files_in_one_query(
    fedkt_submissions, django_assert_num_queries
):
    with django_assert_num_queries(1):
        members = job_members(submissions=fedkt_submissions, privacy_level="L0")
    assert [member.key for member in members] == [str(s.id) for s in fedkt_submissions]
    assert [member.n_models for member in members] == [2, 2, 2]


def test_a_chunk_of_three_members_runs_as_many_queries_as_a_chunk_of_one(
    operator, fedkt_submissions, settings
):
    def first_chunk_queries(chunk_size: int) -> tuple[int, int]:
        settings.ONEFOLD_JOB_CHUNK_SIZE = chunk_size
        job = job_create(
            federation=fedkt_submissions[0].federation,
            kind="fedkt",
            privacy_level="L0",
            parameters=FAST_FEDKT,
            submissions=[s.id for s in fedkt_submissions],
            seed=1,
            requested_by=operator,
        )
        chunk_ids = job_start(job_id=job.id)
        with CaptureQueriesContext(connection) as queries:
            job_chunk_run(chunk_id=chunk_ids[0])
        chunk = JobChunk.objects.get(id=chunk_ids[0])
        assert chunk.status == ChunkStatus.DONE, chunk.job.failure_reason
        return len(chunk.submission_ids), len(queries)

    members_one, queries_one = first_chunk_queries(1)
    members_three, queries_three = first_chunk_queries(3)
    assert (members_one, members_three) == (1, 3)
    assert queries_three == queries_one
