"""Time to value 50 silos on Adult after a job, against the job's own wall time (issue 28's target: at most 10 %).

    redis-server --port 6392 --save "" &
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_valuation_bench CELERY_BROKER_URL=redis://127.0.0.1:6392/0 \\
        nice -n 10 .venv/bin/python benchmarks/valuation.py [--silos 50] [--workers 2] [--rounds 3] \\
        [--votes default consistent_hard]

The database in DATABASE_URL is dropped, created and migrated (use a private Redis too: the benchmark purges its
queue). The federation is the product's demo Adult federation (``onefold_demo``'s shipped data: 3,000 public rows,
the 1,000-row evaluation split); the 12,000 rows of ``adult-silos.csv.gz`` are dealt IID to ``--silos``
organisations, each trains FedKT's party side with the silo toolkit's defaults (:func:`workers.silo.training.
silo_train`: s = 2 partitions of 5 depth-6 tree teachers, 25-tree forest students, no own model) and uploads its
students through the market's service (``submission_create``), which a Celery worker validates. Then, per vote
rule in ``--votes`` and round, an L0 FedKT job over every silo's submission runs through
``celery worker --concurrency N`` (prefork) until its row says succeeded, exactly as the product runs it; its
finalize values the silos (:func:`workers.runner.valuing.job_contribution_values`) and logs how long that took.
``default`` is the job's default parameters (``vote: auto``, which fits every vote rule, the ensemble and the
stack, keeps the best on half of the evaluation split and reports, and values, on the other half); another name
is that ``vote`` with the other parameters default (``consistent_hard``: one fusion, valued on all the rows).

- job wall time: from ``job_create`` until the job row says succeeded (this process polls every 0.1 s);
- valuation: the seconds the job's log line reports (:data:`workers.runner.valuing.VALUATION_LOGGED`), measured
  inside the same job's finalize;
- ratio: valuation / (job wall time − valuation), the share the valuation adds to the job without it.

A warm-up job over two silos (not timed) lets every prefork child import the stack first. The 1-minute load
average is recorded at each round's start and end (the machine is shared; the benchmark's own processes make
about 1 to 2). Prints a Markdown table to stdout.
"""

import argparse
import gzip
import io
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from jobs import (  # noqa: E402 (benchmarks/jobs.py, importable by the path above)
    celery_worker_start,
    django_on_a_fresh_database,
    job_phases,
    load_average,
)

DEMO_DATA = ROOT / "market" / "federations" / "demo_data"
TARGET_RATIO = 0.10
ADULT_LABELS = ["<=50K", ">50K"]


def setup_federation(n_silos: int):
    """The demo Adult federation, ``n_silos`` member organisations with one user each, and their tables."""
    import numpy as np
    import pandas as pd

    from market.accounts.services import organisation_create, user_create
    from market.federations.membership import federation_join
    from market.federations.services import (
        evaluation_split_upload,
        federation_create,
        public_dataset_upload,
    )
    from workers.partition import iid_partition

    operator = user_create(
        username="bench-operator", password="bench-operator-pw", is_operator=True
    )
    federation = federation_create(
        name="Adult income",
        description="Valuation benchmark",
        class_labels=ADULT_LABELS,
        label_column="income",
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L0",
        default_parameters={},
        policies={"membership_policy": "open"},
        created_by=operator,
    )
    public_dataset_upload(
        federation=federation,
        data=gzip.decompress((DEMO_DATA / "adult-public.csv.gz").read_bytes()),
        uploaded_by=operator,
    )
    evaluation_split_upload(
        federation=federation,
        data=gzip.decompress((DEMO_DATA / "adult-evaluation.csv.gz").read_bytes()),
        uploaded_by=operator,
    )
    silos = pd.read_csv(
        io.BytesIO(gzip.decompress((DEMO_DATA / "adult-silos.csv.gz").read_bytes()))
    )
    users, tables = [], []
    for index, rows in enumerate(iid_partition(len(silos), n_silos, seed=0)):
        organisation = organisation_create(name=f"Silo {index + 1:02d}")
        user = user_create(
            username=f"silo-{index + 1:02d}", password="bench-silo-pw", organisation=organisation
        )
        federation_join(federation=federation, user=user)
        users.append(user)
        tables.append(silos.iloc[np.sort(rows)].reset_index(drop=True))
    return operator, federation, users, tables


def upload_silos(federation, users, tables) -> list:
    """Each silo trains with the toolkit's defaults (no own model) and uploads its students."""
    from market.storage import arrays_from_npz
    from market.submissions.services import submission_create
    from market.submissions.uploads import SubmissionUpload, UploadedModel
    from workers.features import view_width
    from workers.silo.students import export_student
    from workers.silo.training import TrainingSettings, silo_train

    public_dataset = federation.public_datasets.first()
    spec = public_dataset.feature_spec
    public = arrays_from_npz(public_dataset.features_file)["features"]
    submissions = []
    for index, (user, table) in enumerate(zip(users, tables, strict=True)):
        settings = TrainingSettings(own_model=None, seed=index)
        result, _ = silo_train(
            table,
            spec,
            public,
            label_column="income",
            class_labels=ADULT_LABELS,
            settings=settings,
        )
        width = view_width(spec, settings.feature_view())
        exported = [
            export_student(model, n_features=width, n_classes=len(ADULT_LABELS))
            for model in result.models
        ]
        metadata = result.metadata
        submissions.append(
            submission_create(
                federation=federation,
                user=user,
                upload=SubmissionUpload(
                    models=[
                        UploadedModel(f"student-{position + 1}{model.suffix}", model.data)
                        for position, model in enumerate(exported)
                    ],
                    model_family=exported[0].model_family,
                    n_local_examples=metadata["n_local_examples"],
                    local_validation_score=metadata["local_validation_score"],
                    label_distribution=metadata["label_distribution"],
                    privacy_level="L0",
                    privacy_parameters={},
                    declared_epsilon=None,
                    feature_view=settings.feature_view(),
                    partitions=metadata["partitions"],
                    teachers=metadata["teachers"],
                ),
            )
        )
    return submissions


def wait_for_validation(submissions) -> None:
    from market.submissions.models import Submission, SubmissionStatus

    ids = [submission.id for submission in submissions]
    waiting = [SubmissionStatus.PENDING, SubmissionStatus.VALIDATING]
    while Submission.objects.filter(id__in=ids, status__in=waiting).exists():
        time.sleep(0.5)
    rejected = Submission.objects.filter(id__in=ids).exclude(status=SubmissionStatus.VALID)
    if rejected.exists():
        raise RuntimeError(
            f"Submissions not valid: {list(rejected.values('id', 'rejection_reason'))}"
        )


def finished_job(federation, operator, submissions, seed: int, parameters: dict):
    from market.jobs.models import Job, JobStatus
    from market.jobs.services import job_create

    started = time.perf_counter()
    job = job_create(
        federation=federation,
        kind="fedkt",
        privacy_level="L0",
        parameters=parameters,
        submissions=[submission.id for submission in submissions],
        seed=seed,
        requested_by=operator,
    )
    while not Job.objects.filter(
        id=job.id, status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED]
    ).exists():
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    job.refresh_from_db()
    if job.status != JobStatus.SUCCEEDED:
        raise RuntimeError(f"Job {job.id} failed: {job.failure_reason}")
    return job, elapsed


def valuation_seconds(job) -> tuple[float, str]:
    """The seconds and the line the job's finalize logged about its valuation."""
    from workers.runner.valuing import VALUATION_LOGGED

    line = job.log_entries.get(message__startswith=VALUATION_LOGGED).message
    return float(re.search(r"computed in ([0-9.]+) s", line).group(1)), line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silos", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--votes", nargs="+", default=["default", "consistent_hard"])
    arguments = parser.parse_args()
    django_on_a_fresh_database("bench-valuation-media")
    from workers.celery_app import app

    began = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    app.control.purge()
    worker = celery_worker_start(arguments.workers, ROOT / "var" / "bench-valuation-worker.log")
    try:
        operator, federation, users, tables = setup_federation(arguments.silos)
        submissions = upload_silos(federation, users, tables)
        wait_for_validation(submissions)
        finished_job(federation, operator, submissions[:2], seed=0, parameters={})  # warm-up
        rounds = []
        for vote in arguments.votes:
            parameters = {} if vote == "default" else {"vote": vote}
            for number in range(arguments.rounds):
                load = load_average()
                job, elapsed = finished_job(
                    federation, operator, submissions, seed=number + 1, parameters=parameters
                )
                seconds, line = valuation_seconds(job)
                rounds.append(
                    {
                        "vote": vote,
                        "round": number + 1,
                        "load": max(load, load_average()),
                        "job": elapsed,
                        "valuation": seconds,
                        "phases": job_phases(job),
                        "logged": line,
                        "rule": job.global_model.contribution_values["rule"],
                    }
                )
                print(
                    f"{vote}, round {number + 1}: job {elapsed:.1f} s, valuation {seconds:.2f} s, "
                    f"load {load:.1f}",
                    file=sys.stderr,
                )
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    report(arguments, rounds, began, time.strftime("%H:%M", time.gmtime()))


def report(arguments, rounds: list[dict], began: str, ended: str) -> None:
    print(
        f"Run of {began}–{ended} UTC, {arguments.silos} silos, `--workers {arguments.workers}`, on a "
        f"{os.cpu_count()}-core machine shared with other sessions (*load*: the 1-minute load average, the "
        "larger of the round's start and end).\n"
    )
    print(
        "| vote | valued by | round | load | job wall time (s) | valuation (s) | job without valuation (s) | "
        "ratio | predicting (s) | fusing (s) | evaluating (s) | saving, valuation included (s) |"
    )
    print("|---|---|" + "---:|" * 10)
    for entry in rounds:
        phases, without = entry["phases"], entry["job"] - entry["valuation"]
        entry["ratio"] = entry["valuation"] / without
        print(
            f"| {entry['vote']} | {entry['rule']} | {entry['round']} | {entry['load']:.1f} | "
            f"{entry['job']:.1f} | {entry['valuation']:.2f} | {without:.1f} | {100 * entry['ratio']:.1f} % | "
            f"{phases['predicting']:.1f} | {phases['fusing']:.1f} | {phases['evaluating']:.1f} | "
            f"{phases['saving']:.1f} |"
        )
    print()
    for vote in arguments.votes:
        entries = [entry for entry in rounds if entry["vote"] == vote]
        median = statistics.median(entry["ratio"] for entry in entries)
        verdict = "met" if median <= TARGET_RATIO else "missed"
        print(
            f"- `{vote}`: median ratio {100 * median:.1f} % (target at most "
            f'{100 * TARGET_RATIO:.0f} %): **{verdict}**. The job\'s log: "{entries[0]["logged"]}"'
        )


if __name__ == "__main__":
    main()
