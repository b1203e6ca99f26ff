"""What the L0 default ``vote: auto`` costs against a hard-vote job on the same uploads, with the BLAS and OpenMP
pools at their default threads and limited to one (as the fusion child runs them, ``workers/jobs/interruptible.py``).

    PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/auto_cost.py \\
        [--dataset adult] [--silos 20] [--seed 0] [--repeats 3] > benchmarks/auto_cost.md

The uploads are the tabular suite's (``workers/reproduce/suite.py``): the data set split as the suite splits it
(validation protocol: the test split is never read), its silos trained by the toolkit with its defaults, and each
job run as ``candidate_run`` runs it (``validate``, ``select``, ``member_signal``, ``fuse``), untimed before the
fusion's own work. The two kinds and the two thread settings run back to back in one process, each ``--repeats``
times (the median is reported); each run fuses exactly the same inputs, and the fused models' scores are printed so
that a thread setting that changed a model would show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from workers.reproduce.suite import (
    Views,
    candidate_run,
    federation_build,
    silos_train,
    suite_table,
    uploads_predict,
)

HARD_VOTE, AUTO = (
    "fedkt",
    "fedkt-auto",
)  # the suite's candidates: FedKT's consistent hard vote, and vote: auto


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def timed(
    name: str, uploads, views, *, n_classes: int, seed: int, threads: int | None, repeats: int
):
    """The median fusion seconds of ``repeats`` runs of the candidate ``name``, the last run's entry and its
    predicted classes of the scored rows."""
    seconds = []
    with threadpool_limits(limits=threads):
        for _ in range(repeats):
            entry, predicted = candidate_run(name, uploads, views, n_classes=n_classes, seed=seed)
            seconds.append(entry["fusion_seconds"])
    return statistics.median(seconds), entry, predicted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult")
    parser.add_argument("--silos", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    started = time.perf_counter()
    frame, label_text = suite_table(arguments.dataset)
    federation = federation_build(frame, label_text, seed=arguments.seed, test=False)
    views = Views(federation)
    silos = silos_train(federation, arguments.silos, seed=arguments.seed)
    uploads = uploads_predict(silos, views, federation.n_classes)
    prepared = time.perf_counter() - started
    load_before = load()
    default_threads = max(pool["num_threads"] for pool in threadpool_info())
    rows = {}
    for threads in (None, 1):
        for name in (HARD_VOTE, AUTO):
            rows[name, threads] = timed(
                name,
                uploads,
                views,
                n_classes=federation.n_classes,
                seed=arguments.seed,
                threads=threads,
                repeats=arguments.repeats,
            )
    load_after = load()

    def label(threads):
        return f"{default_threads} (default)" if threads is None else "1"

    print("# `vote: auto` against a hard-vote job (benchmarks/auto_cost.py)\n")
    print(
        f"{arguments.dataset}, {arguments.silos} silos ({len(uploads)} uploaded), seed {arguments.seed}: "
        f"{len(federation.public)} public rows, {len(federation.evaluation)} evaluation rows, "
        f"{federation.n_classes} classes; silos trained and uploads predicted in {prepared:.0f} s (untimed). "
        f"Machine: {os.cpu_count()} cores, shared with other work.\n"
    )
    print(f"- `uptime` before the timed runs: `{load_before}`")
    print(f"- `uptime` after them: `{load_after}`\n")
    print(
        f"| job | BLAS/OpenMP threads | fusion s (median of {arguments.repeats}) | chosen | accuracy (scored rows) |"
    )
    print("|---|---|---|---|---|")
    for (name, threads), (seconds, entry, _) in rows.items():
        print(
            f"| {name} | {label(threads)} | {seconds:.2f} | {entry['chosen'] or 'consistent_hard'} | "
            f"{entry['accuracy']:.4f} |"
        )
    print("\n| ratio, measured in this run | value |\n|---|---|")
    for threads in (None, 1):
        ratio = rows[AUTO, threads][0] / rows[HARD_VOTE, threads][0]
        print(f"| auto / hard vote, threads: {label(threads)} | {ratio:.2f}× |")
    print(f"| auto, default threads / one thread | {rows[AUTO, None][0] / rows[AUTO, 1][0]:.2f}× |")
    print(
        f"| auto at default threads (before) / hard vote at one thread | "
        f"{rows[AUTO, None][0] / rows[HARD_VOTE, 1][0]:.2f}× |"
    )
    for name in (HARD_VOTE, AUTO):
        same = np.array_equal(rows[name, None][2], rows[name, 1][2]) and (
            rows[name, None][1]["details"] == rows[name, 1][1]["details"]
        )
        print(
            f"\n{name}: the scored rows' predicted classes and the fusion's details with default threads "
            f"{'equal' if same else 'DIFFER FROM'} those with one thread."
        )


if __name__ == "__main__":
    main()
