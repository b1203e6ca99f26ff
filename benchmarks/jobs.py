"""Aggregation jobs at scale: wall time and peak worker memory of a FedKT job over 100 / 500 / 2,000 submissions
with 1 and 2 worker processes, the overhead against calling the pure engine directly in one process, and where a
job's time goes.

    redis-server --port 6391 --save "" &
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_jobs_bench CELERY_BROKER_URL=redis://127.0.0.1:6391/0 \\
        .venv/bin/python benchmarks/jobs.py [--sizes 100 500 2000] [--workers 1 2] [--rounds 2] > benchmarks/jobs.md

``--rounds`` rounds are run at 500 submissions (the targets' size), one round at every other size.

The database in DATABASE_URL is dropped, created and migrated (use a private Redis too, so that no test purges
the benchmark's queue). The federation has the Adult public split (1,000 encoded rows) and an evaluation split
(500 rows). Each submission holds s = 2 logistic-regression students (ONNX) trained on small Adult partitions; 40
distinct student pairs are cycled so that setup stays short (every submission still has its own rows and is
predicted on its own). Submissions are written straight into the database as valid (the benchmark measures jobs,
not uploads).

- *job*: ``job_create`` → Celery workers (one ``celery worker --concurrency N`` with prefork children) until
  the job row says succeeded. Peak memory is the largest ``VmHWM`` (peak RSS) of any worker process.
- *engine*: the same inputs in this process, no database or broker: the members' models predict the public and
  evaluation rows in sandbox children (the same ``stored_models_predict`` calls and chunk size as the job), the
  signals are summed, ``fuse`` is called once and the exported ONNX is evaluated.
- overhead = job wall time / engine wall time. Every round times the engine and the job with each number of
  workers one after the other (the order of the worker counts alternates between rounds), so that the ratios
  compare runs that shared the machine's load; the load average is recorded with each round.
- phases: from the job's own log and chunk rows (queued until claimed, planning, predicting the chunks, fusing,
  evaluating the global model, saving).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DISTINCT_STUDENT_PAIRS = 40
N_PUBLIC, N_EVALUATION = 1000, 500
TARGET_OVERHEAD, TARGET_SPEED_UP, TARGET_SIZE = 1.25, 1.7, 500
PARAMETERS = {"partitions": 2, "query": 0.5, "final_model": {"family": "logistic_regression"}}


def recreate_database(database_url: str) -> None:
    import psycopg

    parsed = urlparse(database_url)
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{parsed.path.lstrip("/")}"')
        connection.execute(f'CREATE DATABASE "{parsed.path.lstrip("/")}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)


def django_on_a_fresh_database(media_folder: str) -> None:
    """Set Django up for a benchmark on the market's settings: the database of DATABASE_URL dropped, made and
    migrated again, its files under var/<media_folder>, quiet logs."""
    os.environ.setdefault("ONEFOLD_DEBUG", "true")
    os.environ.setdefault("ONEFOLD_LOG_LEVEL", "WARNING")
    os.environ.setdefault("ONEFOLD_MEDIA_ROOT", str(ROOT / "var" / media_folder))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    recreate_database(os.environ["DATABASE_URL"])
    import django

    django.setup()


def student_pairs(features, labels) -> list[dict[str, bytes]]:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from workers.modelio.export import export_sklearn_onnx

    pairs = []
    rng = np.random.default_rng(0)
    for _ in range(DISTINCT_STUDENT_PAIRS):
        pair = {}
        for partition in range(2):
            rows = rng.choice(len(labels), size=200, replace=False)
            model = LogisticRegression(max_iter=300).fit(features[rows], labels[rows])
            pair[f"student-{partition}.onnx"] = export_sklearn_onnx(model, features.shape[1])
        pairs.append(pair)
    return pairs


def setup_federation():
    import pandas as pd

    from market.accounts.services import user_create
    from market.federations.services import (
        evaluation_split_upload,
        federation_create,
        public_dataset_upload,
    )
    from tests.conftest import ADULT_LABELS, DATA_DIR, csv_bytes
    from workers.features import encode_features, encode_labels, infer_feature_spec, read_table

    frame = (
        pd.read_parquet(DATA_DIR / "adult.parquet")
        .sample(n=4000, random_state=0)
        .reset_index(drop=True)
    )
    operator = user_create(
        username="bench-operator", password="bench-operator-password", is_operator=True
    )
    federation = federation_create(
        name="Adult income",
        description="Benchmark",
        class_labels=ADULT_LABELS,
        label_column="income",
        allowed_privacy_levels=["L0", "L1", "L2"],
        default_privacy_level="L0",
        default_parameters={},
        created_by=operator,
    )
    public_csv = csv_bytes(frame.iloc[:N_PUBLIC].drop(columns=["income"]))
    public_dataset_upload(federation=federation, data=public_csv, uploaded_by=operator)
    evaluation_split_upload(
        federation=federation,
        data=csv_bytes(frame.iloc[N_PUBLIC : N_PUBLIC + N_EVALUATION]),
        uploaded_by=operator,
    )
    spec = infer_feature_spec(read_table(public_csv), label_column="income")
    training = frame.iloc[N_PUBLIC + N_EVALUATION :]
    return (
        operator,
        federation,
        student_pairs(
            encode_features(training, spec), encode_labels(training["income"], ADULT_LABELS)
        ),
    )


def add_submissions(federation, operator, pairs, count: int) -> list:
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
    public_dataset = federation.public_datasets.first()
    organisations = [
        Organisation.objects.get_or_create(name=f"Silo {index:02d}")[0] for index in range(50)
    ]
    for organisation in organisations:  # a job fuses only its members' submissions
        Membership.objects.get_or_create(federation=federation, organisation=organisation)
    submissions = Submission.objects.bulk_create(
        [
            Submission(
                federation=federation,
                organisation=organisations[index % 50],
                submitted_by=operator,
                public_dataset=public_dataset,
                model_family="logistic_regression",
                n_local_examples=400,
                local_validation_score=0.8,
                privacy_level="L0",
                status=SubmissionStatus.VALID,
                content_sha256=f"bench-{count}-{index}",
            )
            for index in range(count)
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


def worker_tree_peak_mib(pid: int) -> float:
    """Largest peak RSS (VmHWM) among the worker's main process and its prefork children."""
    peaks = []
    for candidate in [pid] + [
        int(child)
        for child in subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True
        ).stdout.split()
    ]:
        try:
            status = Path(f"/proc/{candidate}/status").read_text()
        except OSError:
            continue
        peaks += [
            int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")
        ]
    return max(peaks)


def celery_worker_start(workers: int, log: Path) -> subprocess.Popen:
    """One ``celery worker --concurrency workers`` (prefork) on the broker in CELERY_BROKER_URL, logging to ``log``."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "worker",
            "--concurrency",
            str(workers),
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
            "-n",
            f"bench-{workers}@%h",
        ],
        cwd=ROOT,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def run_job(
    federation, operator, submissions, workers: int, log: Path
) -> tuple[float, float, dict[str, float]]:
    from django.db import transaction

    from market.jobs.models import Job, JobStatus
    from market.jobs.services import job_create
    from workers.celery_app import app

    app.control.purge()
    worker = celery_worker_start(workers, log)

    def finished_job(members) -> float:
        started = time.perf_counter()
        with transaction.atomic():
            job = job_create(
                federation=federation,
                kind="fedkt",
                privacy_level="L0",
                parameters=PARAMETERS,
                submissions=[s.id for s in members],
                seed=1,
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
        return elapsed, job_phases(job)

    try:
        # Warm-up (not timed): every prefork child imports the stack on its first tasks.
        for _ in range(workers):
            finished_job(submissions[: 2 * settings_chunk_size()])
        elapsed, phases = finished_job(submissions)
        return elapsed, worker_tree_peak_mib(worker.pid), phases
    finally:
        worker.terminate()
        worker.wait(timeout=60)


PHASES = ("queued", "planning", "predicting", "fusing", "evaluating", "saving")


def job_phases(job) -> dict[str, float]:
    """Seconds in each phase, read from the job's log (its "Stage: ..." lines) and timestamps."""
    stages = {
        entry.message.removeprefix("Stage: ").rstrip("."): entry.created_at
        for entry in job.log_entries.filter(message__startswith="Stage: ")
    }
    marks = [
        job.created_at,
        job.started_at,
        stages["predicting"],
        stages["fusing"],
        stages["evaluating"],
        stages["saving"],
        job.finished_at,
    ]
    return {
        phase: (end - start).total_seconds()
        for phase, start, end in zip(PHASES, marks[:-1], marks[1:], strict=True)
    }


def settings_chunk_size() -> int:
    from django.conf import settings

    return settings.ONEFOLD_JOB_CHUNK_SIZE


def run_engine(federation, submissions) -> float:
    """The pure path in this process: sandbox predictions per chunk, summed signals, one fuse, one evaluation."""
    import numpy as np
    from django.conf import settings

    from market.sandbox import stored_models_predict
    from market.storage import arrays_from_npz, artifact_read
    from workers.algorithms.registry import Member, algorithm_get
    from workers.jobs.export import export_global_model

    public = arrays_from_npz(federation.public_datasets.first().features_file)["features"]
    evaluation = arrays_from_npz(federation.evaluation_splits.first().data_file)
    features = np.vstack([public, evaluation["features"]])
    files = {s.id: [artifact_read(f.stored_name) for f in s.model_files.all()] for s in submissions}
    algorithm = algorithm_get("fedkt")
    members = [
        Member(
            key=str(s.id),
            organisation=str(s.organisation_id),
            n_examples=400,
            validation_score=0.8,
            n_models=2,
        )
        for s in submissions
    ]
    started = time.perf_counter()
    signal_sum, size = None, settings.ONEFOLD_JOB_CHUNK_SIZE
    for start in range(0, len(submissions), size):
        chunk = submissions[start : start + size]
        outcomes = stored_models_predict(
            [data for s in chunk for data in files[s.id]], features, n_classes=2
        )
        for index in range(len(chunk)):
            probabilities = np.stack(
                [outcomes[2 * index].probabilities, outcomes[2 * index + 1].probabilities]
            )
            signal = algorithm.member_signal(
                probabilities[:, : len(public)],
                member=members[start + index],
                n_classes=2,
                params=PARAMETERS,
            )
            signal_sum = signal if signal_sum is None else signal_sum + signal
    fusion = algorithm.fuse(
        signal_sum, public, members=members, n_classes=2, params=PARAMETERS, seed=1
    )
    exported = export_global_model(fusion.model, n_features=public.shape[1], n_classes=2)
    stored_models_predict(
        [file.data for file in exported if file.format == "onnx"],
        evaluation["features"],
        n_classes=2,
    )
    return time.perf_counter() - started


def load_average() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help=f"rounds at {TARGET_SIZE} submissions (one at other sizes)",
    )
    arguments = parser.parse_args()
    django_on_a_fresh_database("bench-jobs-media")

    began = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    operator, federation, pairs = setup_federation()
    log = ROOT / "var" / "bench-jobs-worker.log"
    rounds = []  # (size, round, load, engine, {workers: (elapsed, peak, phases)})
    for size in arguments.sizes:
        submissions = add_submissions(federation, operator, pairs, size)
        run_engine(
            federation, submissions[:2]
        )  # warm-up: imports and caches, as the workers get theirs
        for number in range(arguments.rounds if size == TARGET_SIZE else 1):
            load = load_average()
            engine = run_engine(federation, submissions)
            jobs = {}
            order = arguments.workers if number % 2 == 0 else arguments.workers[::-1]
            for workers in order:
                jobs[workers] = run_job(federation, operator, submissions, workers, log)
                print(
                    f"{size} submissions, round {number + 1}, {workers} worker(s): {jobs[workers][0]:.1f} s, "
                    f"engine {engine:.1f} s, load {load:.1f}",
                    file=sys.stderr,
                )
            rounds.append((size, number + 1, max(load, load_average()), engine, jobs))
    ended = time.strftime("%H:%M", time.gmtime())
    report(arguments, rounds, began, ended)


def report(arguments, rounds, began: str, ended: str) -> None:
    from django.conf import settings

    workers = arguments.workers
    print("# Aggregation jobs: wall time, peak worker memory, overhead\n")
    print(
        f"Produced by `benchmarks/jobs.py` (its docstring has the setup): FedKT L0 jobs, s = 2 logistic-regression "
        f"students (ONNX) per submission, {N_PUBLIC} public rows (query 0.5), {N_EVALUATION} evaluation rows, "
        f"chunks of {settings.ONEFOLD_JOB_CHUNK_SIZE} submissions (`ONEFOLD_JOB_CHUNK_SIZE`), one "
        "`celery worker --concurrency N` (prefork) on its own Redis, PostgreSQL. *Engine alone* is the same "
        "sandboxed predictions, summed signals, one `fuse` and the evaluation of the exported ONNX in one "
        "process, without database, broker or per-member metrics. Peak RSS is the largest `VmHWM` of any worker "
        "process (main or child).\n"
    )
    print(
        f"Run of {began}–{ended} UTC on a {os.cpu_count()}-core machine; *load* is the 1-minute load average "
        "(the larger of the round's start and end; the benchmark's own processes make about 1). Each round times the engine, "
        "then the job with each number of workers (the order alternates between rounds), so that the ratios "
        "in a row compare runs under the same load; absolute times swing with the load.\n"
    )
    print(
        "| submissions | round | load | engine alone (s) | "
        + " | ".join(
            f"job, {n} worker(s) (s) | overhead, {n} | peak RSS, {n} (MiB)" for n in workers
        )
        + " | speed-up "
        + " vs ".join(str(n) for n in workers[::-1])
        + " |"
    )
    print("|---:" * (4 + 3 * len(workers) + 1) + "|")
    for size, number, load, engine, jobs in rounds:
        cells = " | ".join(
            f"{jobs[n][0]:.1f} | {jobs[n][0] / engine:.2f} | {jobs[n][1]:.0f}" for n in workers
        )
        print(
            f"| {size} | {number} | {load:.1f} | {engine:.1f} | {cells} | "
            f"{jobs[workers[0]][0] / jobs[workers[-1]][0]:.2f} |"
        )
    print(
        "\nWhere the job's time goes (seconds, from the job's log; the last round of each size):\n"
    )
    print("| submissions | workers | " + " | ".join(PHASES) + " | after the last chunk |")
    print("|---:|---:" + "|---:" * (len(PHASES) + 1) + "|")
    last = {size: jobs for size, _, _, _, jobs in rounds}
    for size, jobs in last.items():
        for n in workers:
            phases = jobs[n][2]
            tail = phases["fusing"] + phases["evaluating"] + phases["saving"]
            print(
                f"| {size} | {n} | "
                + " | ".join(f"{phases[phase]:.2f}" for phase in PHASES)
                + f" | {tail:.2f} |"
            )
    targets(rounds, workers)


def targets(rounds, workers) -> None:
    at_target = [
        (load, engine, jobs) for size, _, load, engine, jobs in rounds if size == TARGET_SIZE
    ]
    print(
        "\n**Against the targets** (the median over the rounds; each ratio is taken within one round):\n"
    )
    if at_target and 1 in workers:
        overheads = [jobs[1][0] / engine for _, engine, jobs in at_target]
        overhead = statistics.median(overheads)
        verdict = "met" if overhead <= TARGET_OVERHEAD else "missed"
        print(
            f"- Overhead at {TARGET_SIZE} submissions with one worker process: **{overhead:.2f}** (rounds: "
            f"{', '.join(f'{value:.2f}' for value in overheads)}), target at most {TARGET_OVERHEAD}: "
            f"**{verdict}**. "
            + (
                "The job adds claims, leases, chunk artifacts, the broker and every member's metrics on the "
                "evaluation split to the engine's sandboxed predictions and fusion."
                if verdict == "met"
                else "The difference is the job's database work, the broker and the per-member metrics; "
                "see the phases above and the load of each round."
            )
        )
    if at_target and 1 in workers and 2 in workers:
        speed_ups = [jobs[1][0] / jobs[2][0] for _, _, jobs in at_target]
        speed_up = statistics.median(speed_ups)
        verdict = "met" if speed_up >= TARGET_SPEED_UP else "missed"
        loads = [load for load, _, _ in at_target]
        print(
            f"- Two worker processes against one at {TARGET_SIZE} submissions: **{speed_up:.2f}×** (rounds: "
            f"{', '.join(f'{value:.2f}' for value in speed_ups)}), target at least {TARGET_SPEED_UP}×: "
            f"**{verdict}**. "
            + (
                "The chunks run on both processes; the serial part after the last chunk is in the phases "
                "table."
                if verdict == "met"
                else f"Two workers need two free cores: the load average was {min(loads):.1f}–"
                f"{max(loads):.1f} on {os.cpu_count()} cores during these rounds, so the second process "
                "competed with other sessions' work; the serial part after the last chunk is in the "
                "phases table."
            )
        )
    peaks = {size: max(jobs[n][1] for n in workers) for size, _, _, _, jobs in rounds}
    if len(peaks) > 1:
        smallest, largest = min(peaks), max(peaks)
        growth = peaks[largest] / peaks[smallest]
        verdict = "met" if growth <= 1.2 else "missed"
        print(
            f"- Memory flat from {smallest} to {largest} submissions: peak worker RSS {peaks[smallest]:.0f} → "
            f"{peaks[largest]:.0f} MiB (×{growth:.2f}; flat taken as at most ×1.2): **{verdict}**. A chunk "
            "task holds only its own members' predictions, and the fusion reads the chunks' partial sums one "
            "at a time."
        )
    print(
        "\nReproduce (drops and recreates the database named in `DATABASE_URL`; a private Redis, so that no "
        "test purges the benchmark's queue):\n"
    )
    print("```")
    print('redis-server --port 6391 --save "" &')
    print(
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_jobs_bench "
        "CELERY_BROKER_URL=redis://127.0.0.1:6391/0 \\"
    )
    print(
        f"    .venv/bin/python benchmarks/jobs.py --sizes {' '.join(str(size) for size in dict.fromkeys(size for size, *_ in rounds))} "
        f"--workers {' '.join(map(str, workers))} --rounds {len(at_target) or 1} "
        "> benchmarks/jobs.md"
    )
    print("```")


if __name__ == "__main__":
    main()
