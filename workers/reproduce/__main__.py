"""``python -m workers.reproduce fedkt --dataset adult [--seeds 3] [--tables 1,2,3] [--n-jobs 2]``

Runs the FedKT paper's experiments (``workers.reproduce.experiments``), stores each seed's raw
results in ``docs/results/fedkt_<dataset>.json`` (merged into that seed's earlier entry) and
regenerates ``docs/results/fedkt_tables.md`` and the PNG plots. Wall time and peak memory per
stage are printed as it goes.

The other papers (``workers.reproduce.guha``, ``workers.reproduce.protocols``)::

    python -m workers.reproduce guha --dataset adult|magic [--seeds 3]   # Guha Figures 1 and 3
    python -m workers.reproduce cpfl [--seeds 3]                         # CPFL Table 1, trade-off
    python -m workers.reproduce fd [--seeds 3]                           # FD Table 1
    python -m workers.reproduce kernel-memory [--points 10000]           # kernel distillation memory

Each writes ``docs/results/<paper>_<dataset>.json`` (one entry per seed, replaced on a rerun)
and regenerates ``docs/results/<paper>_tables.md`` and its PNG plots.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from workers.modelio.families import NETWORK_FAMILIES
from workers.reproduce.report import write_tables
from workers.reproduce.settings import SETTINGS

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _save(folder: Path, results: dict, suffix: str = "") -> None:
    path = folder / f"fedkt_{results['dataset']}{suffix}.json"
    runs = json.loads(path.read_text()) if path.exists() else []
    earlier = next((run for run in runs if run["seed"] == results["seed"]), {})
    if (
        "table3" in earlier and "table3" in results
    ):  # a Table-2-only run keeps the earlier fractions
        results["table3"] = {**earlier["table3"], **results["table3"]}
    runs = [run for run in runs if run["seed"] != results["seed"]] + [{**earlier, **results}]
    path.write_text(json.dumps(sorted(runs, key=lambda run: run["seed"]), indent=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce")
    parser.add_argument(
        "experiment", choices=["fedkt", "report", "guha", "cpfl", "fd", "kernel-memory"]
    )
    parser.add_argument("--dataset", choices=sorted(SETTINGS))
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0 .. seeds-1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--tables", default="1,3", help="comma-separated: 1, 2, 3 (2 needs 1; 3 includes 1)"
    )
    parser.add_argument("--n-jobs", type=int, default=2, help="worker processes for the parties")
    parser.add_argument(
        "--table2-levels",
        default="L1,L2",
        help="Table 2's levels: L1,L2 or L1 (L2 retrains every party's students per setting)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--beta",
        type=float,
        default=None,
        help="override the Dirichlet β (sensitivity study, saved as fedkt_<dataset>_beta<β>.json)",
    )
    parser.add_argument(
        "--torch-epochs",
        type=int,
        default=None,
        help="override the epochs of every torch learner (compute sensitivity, _epochs<N>.json)",
    )
    parser.add_argument(
        "--cap-at-mean",
        action="store_true",
        help="NIID-Bench's capped Dirichlet partition (sensitivity, fedkt_<dataset>_capped.json)",
    )
    parser.add_argument("--devices", type=int, default=200, help="guha: number of devices")
    parser.add_argument("--points", type=int, default=10_000, help="kernel-memory: proxy points")
    arguments = parser.parse_args(argv)
    arguments.out.mkdir(parents=True, exist_ok=True)
    if arguments.experiment in ("guha", "cpfl", "fd", "kernel-memory"):
        from workers.reproduce.papers_main import run_paper

        print(f"tables: {run_paper(arguments)}")
        return 0
    if arguments.experiment == "fedkt":
        if arguments.dataset is None:
            parser.error("fedkt needs --dataset")
        _run(arguments)
    print(f"tables: {write_tables(arguments.out)}")
    return 0


def _run(arguments) -> None:
    from workers.reproduce.experiments import Run, table2_mechanisms

    tables = {int(table) for table in arguments.tables.split(",")}
    setting = SETTINGS[arguments.dataset]
    suffix = ""
    if arguments.beta is not None:
        setting, suffix = replace(setting, beta=arguments.beta), f"_beta{arguments.beta:g}"
    if arguments.cap_at_mean:
        setting, suffix = replace(setting, cap_at_mean=True), suffix + "_capped"
    if arguments.torch_epochs is not None:
        setting = replace(
            setting,
            teacher=_with_epochs(setting.teacher, arguments.torch_epochs),
            student=_with_epochs(setting.student, arguments.torch_epochs),
        )
        suffix += f"_epochs{arguments.torch_epochs}"
    for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
        started = time.perf_counter()
        with Run(setting, seed, arguments.n_jobs, log=lambda line: print(line, flush=True)) as run:
            run.table1()
            run.table3((0.2, 0.4, 0.6, 0.8, 1.0) if 3 in tables else (1.0,))
            if 2 in tables:
                run.table2(table2_mechanisms(), levels=tuple(arguments.table2_levels.split(",")))
        run.results["wall_seconds"] = time.perf_counter() - started
        run.results["partition"] = {"beta": setting.beta, "cap_at_mean": setting.cap_at_mean}
        run.results["variant"] = suffix.lstrip("_") or "protocol"
        run.results["learners"] = setting.model
        _save(arguments.out, run.results, suffix)
        print(
            f"[{arguments.dataset} seed {seed}] done in {run.results['wall_seconds']:.0f} s: SOLO "
            f"{run.results['solo']:.4f} PATE {run.results['pate']:.4f} FedKT-L0 {run.results['fedkt_l0']:.4f} "
            f"centralised {run.results['centralised']:.4f}",
            flush=True,
        )


def _with_epochs(learner, epochs: int):
    if isinstance(learner, dict) and learner.get("family") in NETWORK_FAMILIES:
        return {**learner, "epochs": epochs}
    return learner


if __name__ == "__main__":
    sys.exit(main())
