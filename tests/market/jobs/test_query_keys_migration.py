"""Jobs queued before queries said what they mean keep the meaning they were created with
(market/jobs/migrations/0005_query_keys_say_what_they_mean.py)."""

import importlib

import pytest
from django.apps import apps

from market.jobs.models import Job, JobStatus
from tests.market.jobs.helpers import post_job

migration = importlib.import_module("market.jobs.migrations.0005_query_keys_say_what_they_mean")


@pytest.mark.parametrize(
    "stored, converted",
    [
        (
            {"partitions": 2, "query": 1.0},
            {"partitions": 2, "query_fraction": 1.0},
        ),  # the launcher's "every row"
        ({"partitions": 2, "query": 1}, {"partitions": 2, "query_count": 1}),
        ({"query": 0.25}, {"query_fraction": 0.25}),
        ({"proxy": 300}, {"query_count": 300}),
        ({"query_count": 5}, {"query_count": 5}),
        (
            {"query": 2, "query_count": 5},
            {"query": 2, "query_count": 5},
        ),  # ambiguous: left for the engine to refuse
        ({"query": "all"}, {"query": "all"}),
        ({"query": True}, {"query": True}),
    ],
)
def test_a_legacy_query_key_becomes_the_key_its_json_type_meant(stored, converted):
    assert migration.parameters_with_explicit_query(stored) == converted


def test_only_unfinished_jobs_are_converted(operator, fedkt_submissions):
    federation = fedkt_submissions[0].federation
    queued = post_job(
        operator, federation, kind="fedkt", privacy_level="L0", parameters={"query_count": 100}
    )
    finished = post_job(
        operator, federation, kind="fedkt", privacy_level="L0", parameters={"query_count": 100}
    )
    Job.objects.filter(id=queued.json()["id"]).update(parameters={"partitions": 2, "query": 1.0})
    Job.objects.filter(id=finished.json()["id"]).update(
        parameters={"partitions": 2, "query": 1.0}, status=JobStatus.CANCELLED
    )

    migration.convert_unfinished_jobs(apps, None)

    assert Job.objects.get(id=queued.json()["id"]).parameters == {
        "partitions": 2,
        "query_fraction": 1.0,
    }
    assert Job.objects.get(id=finished.json()["id"]).parameters == {"partitions": 2, "query": 1.0}
