"""Jobs stored with the old ``query`` / ``proxy`` key say what it meant when they were created: a float was a
fraction of the public rows and an integer a count (``workers.algorithms.transfer.select_queries``). The engines
now refuse the ambiguous ``1`` / ``1.0``, so a job queued before the change would otherwise fail when it runs."""

from django.db import migrations

LEGACY_QUERY_KEYS = ("query", "proxy")
UNFINISHED = ("queued", "running")


def parameters_with_explicit_query(parameters: dict) -> dict:
    """``parameters`` with a legacy query key replaced by ``query_fraction`` (a float) or ``query_count`` (an int)."""
    legacy = [key for key in LEGACY_QUERY_KEYS if key in parameters]
    if len(legacy) != 1 or {"query_fraction", "query_count"} & set(parameters):
        return parameters  # nothing to do, or ambiguous: the engine's own sentence explains it when the job runs
    value = parameters[legacy[0]]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return parameters
    converted = {key: item for key, item in parameters.items() if key != legacy[0]}
    converted["query_fraction" if isinstance(value, float) else "query_count"] = value
    return converted


def convert_unfinished_jobs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(status__in=UNFINISHED).only("id", "parameters"):
        converted = parameters_with_explicit_query(job.parameters or {})
        if converted != job.parameters:
            Job.objects.filter(id=job.id).update(parameters=converted)


class Migration(migrations.Migration):

    dependencies = [("jobs", "0004_job_idempotency_key")]

    operations = [migrations.RunPython(convert_unfinished_jobs, migrations.RunPython.noop)]
