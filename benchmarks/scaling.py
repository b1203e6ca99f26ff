"""What grows with the number of silos: creating an L1 job (its privacy-budget reservation) and the database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_scaling_bench \\
        .venv/bin/python benchmarks/scaling.py [--silos 100 500 2000] [--jobs 3]

The database in DATABASE_URL is dropped, created and migrated. For each size, a fresh federation (the jobs
benchmark's Adult public and evaluation splits) gets that many member organisations ("silos"), each with one valid
FedKT submission (two logistic-regression students from ``benchmarks/jobs.py``, written straight into the database
as valid). Then ``--jobs`` L1 FedKT jobs over all the silos are created one after another with ``job_create``, the
service behind ``POST /api/jobs/``: validation, then in one transaction the job, its member links and the
reservation of every silo's privacy budget (each budget row locked, its ledger replayed, one ledger entry written).
No worker runs (``benchmarks/jobs.md`` measures running jobs): the jobs stay queued. Printed: wall time and SQL
statements of each ``job_create``, and the database bytes added per silo and per job. ``docs/scaling.md`` reads it.
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
L1_PARAMETERS = {
    "partitions": 2,
    "query": 20,
    "privacy": {"gamma": 0.02},
    "final_model": {"family": "logistic_regression"},
}  # ε ≈ 1.6 per job: 3 jobs fit the default 10
TABLES = [
    "accounts_organisation",
    "federations_membership",
    "budgets_privacybudget",
    "budgets_budgetentry",
    "submissions_submission",
    "submissions_modelfile",
    "jobs_job",
    "jobs_job_submissions",
    "audit_auditevent",
]


def add_silos(federation, operator, pairs, count: int, first: int) -> list:
    from market.accounts.models import Organisation
    from market.federations.models import Membership
    from market.storage import artifact_save, sha256_of
    from market.submissions.models import ModelFile, Submission, SubmissionStatus

    stored = [
        {
            name: (
                artifact_save(name=f"bench/{index}/{name}", data=data, stored_names=[]),
                sha256_of(data),
                len(data),
            )
            for name, data in pair.items()
        }
        for index, pair in enumerate(pairs)
    ]
    organisations = Organisation.objects.bulk_create(
        [Organisation(name=f"Silo {first + index:06d}", is_silo=True) for index in range(count)]
    )
    Membership.objects.bulk_create(
        [
            Membership(federation=federation, organisation=organisation)
            for organisation in organisations
        ]
    )
    public_dataset = federation.public_datasets.first()
    submissions = Submission.objects.bulk_create(
        [
            Submission(
                federation=federation,
                organisation=organisation,
                submitted_by=operator,
                public_dataset=public_dataset,
                model_family="logistic_regression",
                n_local_examples=400,
                local_validation_score=0.8,
                privacy_level="L0",
                status=SubmissionStatus.VALID,
                content_sha256=f"scaling-{first + index}",
            )
            for index, organisation in enumerate(organisations)
        ]
    )
    ModelFile.objects.bulk_create(
        [
            ModelFile(
                submission=submission,
                position=position,
                original_name=name,
                stored_name=stored_name,
                sha256=sha256,
                size_bytes=size,
                format="onnx",
                info={},
            )
            for index, submission in enumerate(submissions)
            for position, (name, (stored_name, sha256, size)) in enumerate(
                stored[index % len(stored)].items()
            )
        ]
    )
    return submissions


def table_bytes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            [TABLES],
        )
        return dict(cursor.fetchall())


def vacuumed_table_bytes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f'VACUUM ANALYZE "{table}"')
    return table_bytes()


def timed_job_create(federation, operator, submissions) -> tuple[float, float, int]:
    """Wall seconds, seconds in SQL statements and the number of statements of one ``job_create``."""
    from django.db import connection

    from market.jobs.services import job_create
    from market.server_timing import DatabaseTime

    database = DatabaseTime()
    with connection.execute_wrapper(database):
        started = time.perf_counter()
        job_create(
            federation=federation,
            kind="fedkt",
            privacy_level="L1",
            parameters=L1_PARAMETERS,
            submissions=[submission.id for submission in submissions],
            seed=1,
            requested_by=operator,
        )
        elapsed = time.perf_counter() - started
    return elapsed, database.seconds, database.queries


def federation_for(size: int, operator, public_csv: bytes, evaluation_csv: bytes):
    from market.federations.services import (
        evaluation_split_upload,
        federation_create,
        public_dataset_upload,
    )
    from tests.conftest import ADULT_LABELS

    federation = federation_create(
        name=f"Adult income, {size or 'warm-up'} silos",
        description="Benchmark",
        class_labels=ADULT_LABELS,
        label_column="income",
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L1",
        default_parameters={},
        created_by=operator,
    )
    public_dataset_upload(federation=federation, data=public_csv, uploaded_by=operator)
    evaluation_split_upload(federation=federation, data=evaluation_csv, uploaded_by=operator)
    return federation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silos", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--jobs", type=int, default=3)
    arguments = parser.parse_args()
    os.environ.setdefault("ONEFOLD_DEBUG", "true")
    os.environ.setdefault("ONEFOLD_LOG_LEVEL", "WARNING")
    os.environ.setdefault("ONEFOLD_MEDIA_ROOT", str(ROOT / "var" / "bench-scaling-media"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    import jobs as jobs_benchmark  # benchmarks/jobs.py: the database, the Adult splits and the students

    jobs_benchmark.recreate_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    import pandas as pd

    from tests.conftest import DATA_DIR, csv_bytes

    operator, _, pairs = jobs_benchmark.setup_federation()
    frame = (
        pd.read_parquet(DATA_DIR / "adult.parquet")
        .sample(n=4000, random_state=0)
        .reset_index(drop=True)
    )
    public_csv = csv_bytes(frame.iloc[: jobs_benchmark.N_PUBLIC].drop(columns=["income"]))
    evaluation_csv = csv_bytes(
        frame.iloc[jobs_benchmark.N_PUBLIC : jobs_benchmark.N_PUBLIC + jobs_benchmark.N_EVALUATION]
    )
    # imports and caches, not timed
    warm_up = federation_for(0, operator, public_csv, evaluation_csv)
    timed_job_create(warm_up, operator, add_silos(warm_up, operator, pairs, 2, first=10**6))
    rows, first = [], 0
    for size in arguments.silos:
        federation = federation_for(size, operator, public_csv, evaluation_csv)
        before = vacuumed_table_bytes()
        submissions = add_silos(federation, operator, pairs, size, first)
        first += size
        with_silos = vacuumed_table_bytes()
        creations = [
            timed_job_create(federation, operator, submissions) for _ in range(arguments.jobs)
        ]
        after = vacuumed_table_bytes()
        per_silo = sum(with_silos[table] - before[table] for table in TABLES) / size
        per_job = sum(after[table] - with_silos[table] for table in TABLES) / arguments.jobs
        rows.append((size, creations, per_silo, per_job))
        print(
            f"{size} silos: job_create {[f'{c[0]:.2f} s' for c in creations]}",
            file=sys.stderr,
        )
    print_report(rows, arguments.jobs)


def print_report(rows, jobs: int) -> None:
    print(
        f"| silos | `job_create` at L1, 1st of {jobs} jobs (s) | last (s) | of which in SQL (s) | "
        "SQL statements | statements per silo | database bytes per silo (organisation, membership, budget, "
        "submission, files) | database bytes per job and silo (member link, ledger entry, job) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, creations, per_silo, per_job in rows:
        last_seconds, last_database_seconds, last_queries = creations[-1]
        print(
            f"| {size:,} | {creations[0][0]:.2f} | {last_seconds:.2f} | {last_database_seconds:.2f} | "
            f"{last_queries:,} | {last_queries / size:.1f} | {per_silo:,.0f} | {per_job / size:,.0f} |"
        )
    print(
        f"\nMachine: {os.cpu_count()} cores, 1-minute load average {os.getloadavg()[0]:.1f} at the end of the run "
        "(other processes shared the cores). Produced by `benchmarks/scaling.py`."
    )


if __name__ == "__main__":
    main()
