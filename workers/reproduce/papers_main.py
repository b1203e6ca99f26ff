"""The ``guha``, ``cpfl``, ``fd`` and ``kernel-memory`` subcommands of ``python -m workers.reproduce``."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from workers.reproduce.papers_report import write_paper_reports

GUHA_BETA, GUHA_MIN_SAMPLES = 0.5, 20


def _save(path: Path, records: list[dict], key) -> None:
    """Replace the records of the same key (e.g. seed) in ``path`` and keep the others."""
    earlier = json.loads(path.read_text()) if path.exists() else []
    fresh = {key(record) for record in records}
    kept = [record for record in earlier if key(record) not in fresh]
    path.write_text(json.dumps(sorted(kept + records, key=key), indent=1))


def run_paper(arguments) -> Path:
    seeds = range(arguments.first_seed, arguments.first_seed + arguments.seeds)
    log = lambda line: print(line, flush=True)  # noqa: E731
    if arguments.experiment == "guha":
        from workers.reproduce.guha import run_guha

        if arguments.dataset not in ("adult", "magic"):
            raise SystemExit("guha needs --dataset adult or magic")
        for seed in seeds:
            result = run_guha(
                arguments.dataset,
                seed,
                n_devices=arguments.devices,
                beta=GUHA_BETA,
                min_samples=GUHA_MIN_SAMPLES,
                log=log,
            )
            suffix = "" if arguments.devices == 200 else f"_devices{arguments.devices}"
            _save(
                arguments.out / f"guha_{arguments.dataset}{suffix}.json",
                [result],
                lambda r: r["seed"],
            )
        return write_paper_reports(arguments.out, "guha")
    if arguments.experiment == "cpfl":
        from workers.reproduce.protocols import run_cpfl

        for seed in seeds:
            _save(
                arguments.out / "cpfl_fashion.json",
                run_cpfl(seed, log=log),
                lambda r: (r["seed"], r["alpha"], r["n_cohorts"]),
            )
        return write_paper_reports(arguments.out, "cpfl")
    if arguments.experiment == "fd":
        from workers.reproduce.protocols import run_fd

        for seed in seeds:
            _save(
                arguments.out / "fd_mnist.json",
                run_fd(seed, log=log),
                lambda r: (r["seed"], r["n_devices"], r["protocol"]),
            )
        return write_paper_reports(arguments.out, "fd")
    return _kernel_memory(arguments)


def _kernel_memory(arguments) -> Path:
    """Each solver in a fresh (spawned) process, so that its peak RSS is its own."""
    from workers.reproduce.protocols import kernel_memory

    results = []
    for solver in ("cholesky", "cg"):
        with ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            results.append(pool.submit(kernel_memory, arguments.points, solver).result())
        print(results[-1], flush=True)
    path = arguments.out / "kernel_memory.json"
    path.write_text(json.dumps(results, indent=1))
    return path
