"""Confident-GNMax on Adult (issue 25 item 2): FedKT-L1 whose server answers only the queries the silos agree on.

``python -m workers.reproduce.confident choose [--seeds 3] [--draws 2]``   (validation rows only: T, σ₁, σ₂)
``python -m workers.reproduce.confident test [--seeds 3] [--draws 4]``     (the chosen setting on the test split)
``python -m workers.reproduce.confident table``                            (the Markdown tables of both)

The protocol and the silos' cached votes are :mod:`workers.reproduce.private`'s (run its ``cache`` first); every
setting runs the job engine's server step with :class:`workers.privacy.mechanisms.ConfidentGaussianNoise` at the
market's calibration (:func:`workers.privacy.costs.calibrate_gnmax` with ``confident``): T and σ₁ are fixed shares
of the votes a query can hold, σ₂ is ``noise_ratio`` × those votes, and the job considers the most candidate
queries whose data-independent ε (every candidate charged its check and its answer) fits the budget. The test
split is read only by ``test``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from workers.reproduce import private
from workers.reproduce.private import CACHE, RESULTS, party_votes, run_l1

CONFIDENT_RESULTS = RESULTS.with_name("private_adult_confident.json")
CONFIDENT_TEST_RESULTS = RESULTS.with_name("private_adult_confident_test.json")
#: The ε of the issue's targets.
EPSILONS = (2.56, 4.73)
#: The grid (shares of the votes a query can hold): σ₂, T and σ₁; the product's query selection.
NOISE_RATIOS = (0.2, 0.3)
THRESHOLD_RATIOS = (0.5, 0.6, 0.75, 0.9)
CHECK_NOISE_RATIOS = (0.3, 0.6)
SEMI_SUPERVISED = ("none", "self_training")
SETTING_KEYS = ("noise_ratio", "threshold_ratio", "check_noise_ratio", "semi_supervised")


def grid() -> list[dict]:
    return [
        dict(zip(SETTING_KEYS, values))
        for values in itertools.product(
            NOISE_RATIOS, THRESHOLD_RATIOS, CHECK_NOISE_RATIOS, SEMI_SUPERVISED
        )
    ]


def seed_means(entries: list[dict], key: str) -> dict:
    """Per (setting, ε): each seed's mean over its noise draws of ``key``, in seed order."""
    return private.seed_means(
        entries, key, setting_of_entry=lambda entry: tuple(entry[name] for name in SETTING_KEYS)
    )


def choose(entries: list[dict]) -> tuple:
    """The rule of :func:`workers.reproduce.private.choose_setting` over :data:`EPSILONS`. Returns the setting's
    values in :data:`SETTING_KEYS` order."""
    return private.choose_setting(
        seed_means(entries, "accuracy"), seed_means(entries, "balanced_accuracy"), EPSILONS
    )


def run(seeds, *, test: bool, draws: int, settings: list[dict], cache: Path) -> list[dict]:
    entries = []
    for seed in seeds:
        data = party_votes(seed, test=test, cache=cache)
        for epsilon in EPSILONS:
            for setting in settings:
                for draw in range(draws):
                    entry = {
                        **run_l1(
                            data,
                            seed=seed,
                            epsilon=epsilon,
                            setting={**setting, "query_selection": "random"},
                        ),
                        "level": "L1-confident",
                        "draw": draw,
                        "test": test,
                    }
                    entries.append(entry)
                    print(json.dumps(entry), flush=True)
    return entries


def table(entries: list[dict], *, chosen: tuple | None = None, limit: int | None = None) -> str:
    """Per setting and ε: accuracy (mean ± sd over seeds of each seed's mean over draws), balanced accuracy,
    candidate queries and answered queries (means); the chosen setting in bold; the ``limit`` settings of best
    mean accuracy over ε (default all)."""
    from workers.reproduce.report import mean_std

    accuracy, balanced = seed_means(entries, "accuracy"), seed_means(entries, "balanced_accuracy")
    considered, answered = seed_means(entries, "n_queries"), seed_means(entries, "n_answered")
    epsilons = seed_means(entries, "epsilon")
    lines = [
        "| σ₂ / votes | T / votes | σ₁ / votes | semi-supervised | ε budget | ε charged | candidates | answered "
        "| accuracy (%) | balanced accuracy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = sorted(
        accuracy,
        key=lambda cell: (-np.mean([np.mean(accuracy[cell[0], e]) for e in EPSILONS]), cell),
    )
    best = list(dict.fromkeys(setting for setting, _ in order))[:limit]
    for setting, epsilon in order:
        if setting not in best:
            continue
        cell = (setting, epsilon)
        mark = "**" if setting == chosen else ""
        names = " | ".join(f"{mark}{value}{mark}" for value in setting)
        lines.append(
            f"| {names} | {epsilon:g} | {np.max(epsilons[cell]):.2f} | {np.mean(considered[cell]):.0f} | "
            f"{np.mean(answered[cell]):.1f} | {mean_std(accuracy[cell])} | {mean_std(balanced[cell], scale=1)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.confident")
    parser.add_argument("command", choices=["choose", "test", "table"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=CACHE)
    arguments = parser.parse_args(argv)
    seeds = list(range(arguments.seeds))
    if arguments.command == "choose":
        entries = run(
            seeds, test=False, draws=arguments.draws, settings=grid(), cache=arguments.cache
        )
        CONFIDENT_RESULTS.write_text(json.dumps(entries, indent=1))
    elif arguments.command == "test":
        chosen = choose(json.loads(CONFIDENT_RESULTS.read_text()))
        entries = run(
            seeds,
            test=True,
            draws=arguments.draws,
            settings=[dict(zip(SETTING_KEYS, chosen))],
            cache=arguments.cache,
        )
        CONFIDENT_TEST_RESULTS.write_text(json.dumps(entries, indent=1))
    validation = json.loads(CONFIDENT_RESULTS.read_text())
    chosen = choose(validation)
    print("chosen:", dict(zip(SETTING_KEYS, chosen)))
    print(table(validation, chosen=chosen, limit=None if arguments.command == "table" else 5))
    if CONFIDENT_TEST_RESULTS.exists():
        print(table(json.loads(CONFIDENT_TEST_RESULTS.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
