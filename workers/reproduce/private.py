"""Private models worth buying (issue 25): FedKT-L1 and L2 on Adult against an honest party-level ε.

``python -m workers.reproduce.private choose [--seeds 3]``   (validation rows only: the defaults' choice)
``python -m workers.reproduce.private test [--seeds 3]``     (the test split, once, the chosen defaults)
``python -m workers.reproduce.private l2 [--seeds 3]``       (L2 at the paper's settings, test split)
``python -m workers.reproduce.private plot``                 (the accuracy-vs-ε plot from the saved runs)

Protocol: :mod:`workers.reproduce.defaults` (Adult 75 / 12.5 / 12.5 %, 50 parties by Dirichlet(0.5),
s = 2, t = 5, the product's default learners on the ordinal view, δ = 1e-5, party-level unit at L1). The
parties' students do not depend on the server's settings, so each seed's summed consistent votes on the
public rows are computed once and cached (``--cache``, default ``/tmp/onefold_private``); every server
setting then runs the job engine's own step (``algorithm_get("fedkt").fuse`` with GNMax noise), and its
privacy report gives the data-independent ε. Without ``test`` a stratified 15 % of the training split is
the validation set and the test split is never read. The noise is OpenDP's and is not seeded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.fedkt import FedKTConfig, fit_parties
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.transfer import QUERY_SELECTIONS
from workers.partition import dirichlet_label_partition
from workers.reproduce.defaults import (
    N_PARTIES,
    PRODUCT_DEFAULTS,
    adult_protocol_test,
    adult_without_test,
)

CACHE = Path("/tmp/onefold_private")
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "private_adult.json"
TEST_RESULTS = RESULTS.with_name("private_adult_test.json")
L2_RESULTS, L2_TEST_RESULTS = (
    RESULTS.with_name("private_adult_l2.json"),
    RESULTS.with_name("private_adult_l2_test.json"),
)
DELTA, PARTITIONS, TEACHERS = 1e-5, 2, 5


def party_votes(seed: int, *, test: bool, cache: Path = CACHE) -> dict:
    """The public rows, the scored rows and the 50 parties' summed consistent votes of one seed (cached)."""
    path = cache / f"{'test' if test else 'validation'}_{seed}.npz"
    if path.exists():
        with np.load(path) as stored:
            return dict(stored)
    view, teacher, student, final = PRODUCT_DEFAULTS
    data = adult_protocol_test(seed, view) if test else adult_without_test(seed, view)
    parts = dirichlet_label_partition(data["pool_y"], N_PARTIES, beta=0.5, seed=seed, min_size=10)
    started = time.perf_counter()
    parties = fit_parties(
        [(data["pool_x"][part], data["pool_y"][part]) for part in parts],
        data["public_x"],
        n_classes=2,
        config=FedKTConfig(teacher=teacher, student=student, final=final),
        seed=seed,
    )
    engine = algorithm_get("fedkt")
    params = engine.validate({"final_model": final})
    votes = sum(
        engine.member_signal(
            np.stack([model.predict_proba(data["public_x"]) for model in party.students]),
            member=Member(
                key=str(j),
                organisation=str(j),
                n_examples=len(part),
                validation_score=0.0,
                n_models=2,
            ),
            n_classes=2,
            params=params,
        )
        for j, (party, part) in enumerate(zip(parties, parts))
    )
    result = {
        "public_x": data["public_x"],
        "scored_x": data["validation_x"],
        "scored_y": data["validation_y"],
        "votes": np.asarray(votes),
        "party_sizes": np.array([len(part) for part in parts]),
        "party_seconds": np.array(time.perf_counter() - started),
    }
    cache.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **result)
    return result


def gnmax_privacy(epsilon: float, noise_ratio: float, *, n_parties: int, n_public: int) -> dict:
    """The market's GNMax calibration (:func:`workers.privacy.costs.calibrate_gnmax`) for a job of ``n_parties``
    silos with one submission each and a budget of ``epsilon`` each (nothing spent before)."""
    from workers.algorithms.schema import MIN_TRAINING_ROWS
    from workers.privacy.costs import BudgetView, calibrate_gnmax, fedkt_price

    privacy = calibrate_gnmax(
        [BudgetView(epsilon_limit=epsilon, delta=DELTA, vote_shift=PARTITIONS)],
        total_votes=n_parties * PARTITIONS,
        noise_ratio=noise_ratio,
        delta=DELTA,
        price=fedkt_price(partitions=PARTITIONS, teachers=TEACHERS),
        min_queries=MIN_TRAINING_ROWS,
        max_queries=n_public,
    )
    assert privacy is not None, "no query fits"
    return privacy


def score(model, data: dict) -> dict:
    from sklearn.metrics import balanced_accuracy_score

    predicted = model.predict(data["scored_x"])
    return {
        "accuracy": float(np.mean(predicted == data["scored_y"])),
        "balanced_accuracy": float(balanced_accuracy_score(data["scored_y"], predicted)),
    }


def run_l1(data: dict, *, seed: int, epsilon: float | None, setting: dict) -> dict:
    """One server step of the engine at ``epsilon`` (None: L0, every public row, no noise) with ``setting``
    (noise_ratio, query_selection, semi_supervised), scored on the data's scored rows."""
    from workers.privacy.mechanisms import GaussianNoise

    engine = algorithm_get("fedkt")
    n_parties, n_public = len(data["party_sizes"]), len(data["public_x"])
    members = [
        Member(
            key=str(j), organisation=str(j), n_examples=int(size), validation_score=0.0, n_models=2
        )
        for j, size in enumerate(data["party_sizes"])
    ]
    final = PRODUCT_DEFAULTS[3]
    if epsilon is None:
        params, noise, privacy = engine.validate({"final_model": final}), None, None
    else:
        privacy = gnmax_privacy(
            epsilon, setting["noise_ratio"], n_parties=n_parties, n_public=n_public
        )
        params = engine.validate(
            {
                "final_model": final,
                "query_count": privacy["n_queries"],
                "query_selection": setting["query_selection"],
                "semi_supervised": setting["semi_supervised"],
                "privacy": {"delta": DELTA},
            }
        )
        noise = GaussianNoise(sigma=privacy["sigma"])
    started = time.perf_counter()
    fusion = engine.fuse(
        data["votes"],
        data["public_x"],
        members=members,
        n_classes=2,
        params=params,
        noise=noise,
        seed=seed,
    )
    return {
        **setting,
        "seed": seed,
        "epsilon_budget": epsilon,
        "epsilon": None if fusion.privacy is None else fusion.privacy.data_independent.epsilon,
        "sigma": None if privacy is None else privacy["sigma"],
        "n_queries": int(fusion.details["n_queried"]),
        **score(fusion.model, data),
        "seconds": time.perf_counter() - started,
    }


def l2_sigma(epsilon: float, n_queries: int) -> float:
    """The least σ whose example-level L2 bound (:func:`workers.privacy.accounting.party_noise_privacy_bound`,
    every party composing n_queries·s noisy queries) stays within ``epsilon`` at δ, by bisection on log σ."""
    from workers.privacy.accounting import party_noise_privacy_bound
    from workers.privacy.mechanisms import GaussianNoise

    def spends(sigma: float) -> float:
        return party_noise_privacy_bound(
            mechanism=GaussianNoise(sigma=sigma),
            n_queries=n_queries,
            partitions=PARTITIONS,
            teachers=TEACHERS,
            delta=DELTA,
        ).epsilon

    low, high = np.log(1e-2), np.log(1e4)
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (low, middle) if spends(np.exp(middle)) <= epsilon else (middle, high)
    return float(np.exp(high))


def run_l2(seed: int, *, test: bool, epsilon: float, fraction: float) -> dict:
    """FedKT-L2 (GNMax at every party, example-level ε) at the paper's query share ``fraction``, σ calibrated to
    ``epsilon``; the server labels every public row without noise (the product's default learners)."""
    from workers.algorithms.fedkt import fedkt_fit
    from workers.privacy.mechanisms import GaussianNoise

    view, teacher, student, final = PRODUCT_DEFAULTS
    data = adult_protocol_test(seed, view) if test else adult_without_test(seed, view)
    parts = dirichlet_label_partition(data["pool_y"], N_PARTIES, beta=0.5, seed=seed, min_size=10)
    n_queries = int(np.ceil(fraction * len(data["public_x"])))
    sigma = l2_sigma(epsilon, n_queries)
    started = time.perf_counter()
    result = fedkt_fit(
        [(data["pool_x"][part], data["pool_y"][part]) for part in parts],
        data["public_x"],
        n_classes=2,
        config=FedKTConfig(
            teacher=teacher, student=student, final=final, party_query=fraction, server_query=1.0
        ),
        seed=seed,
        party_noise=GaussianNoise(sigma=sigma),
        delta=DELTA,
    )
    scored = {"scored_x": data["validation_x"], "scored_y": data["validation_y"]}
    return {
        "level": "L2",
        "seed": seed,
        "test": test,
        "epsilon_budget": epsilon,
        "epsilon": result.privacy.data_independent.epsilon,
        "sigma": sigma,
        "query_fraction": fraction,
        "n_queries": n_queries,
        **score(result.final_model, scored),
        "seconds": time.perf_counter() - started,
    }


EPSILONS = (1.0, 2.56, 4.73, 8.0)
#: The paper's L2 query shares (Table 2).
L2_FRACTIONS = (0.005, 0.01, 0.02)
NOISE_RATIOS = (0.2, 0.3, 0.45)
#: The semi-supervised methods of the grid: label spreading lost on the first seed's validation rows at ε 2.56 and
#: takes 5-10 times as long, so it was dropped from the grid (docs/results/private.md).
GRID_SEMI_SUPERVISED = ("none", "self_training")
#: Noise draws per seed and setting (the noise is not seeded: more draws average it).
DRAWS = 4


def grid() -> list[dict]:
    return [
        {"noise_ratio": ratio, "query_selection": selection, "semi_supervised": semi}
        for ratio in NOISE_RATIOS
        for selection in QUERY_SELECTIONS
        for semi in GRID_SEMI_SUPERVISED
    ]


def save(entries: list[dict], path: Path) -> None:
    path.write_text(json.dumps(entries, indent=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.private")
    parser.add_argument("command", choices=["cache", "choose", "l2", "test", "plot"])
    parser.add_argument("--test", action="store_true", help="l2: score on the test split, once")
    parser.add_argument("--fractions", default=",".join(map(str, L2_FRACTIONS)))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--ratios", default=",".join(map(str, NOISE_RATIOS)))
    parser.add_argument("--seed-list", help="comma-separated seeds (default 0 .. --seeds − 1)")
    parser.add_argument("--draws", type=int, default=DRAWS, help="noise draws per seed and setting")
    arguments = parser.parse_args(argv)
    if arguments.command == "cache":
        for test in (False, True):
            for seed in range(arguments.seeds):
                data = party_votes(seed, test=test, cache=arguments.cache)
                print(test, seed, float(data["party_seconds"]), flush=True)
        return 0
    ratios = [float(value) for value in arguments.ratios.split(",")]
    seeds = (
        [int(value) for value in arguments.seed_list.split(",")]
        if arguments.seed_list
        else list(range(arguments.seeds))
    )
    if arguments.command == "l2":
        path = L2_TEST_RESULTS if arguments.test else L2_RESULTS
        runs = json.loads(path.read_text()) if path.exists() else []
        for seed in seeds:
            for fraction in [float(value) for value in arguments.fractions.split(",")]:
                for epsilon in EPSILONS:
                    entry = run_l2(seed, test=arguments.test, epsilon=epsilon, fraction=fraction)
                    runs = [
                        run
                        for run in runs
                        if (run["seed"], run["query_fraction"], run["epsilon_budget"])
                        != (seed, fraction, epsilon)
                    ] + [entry]
                    path.write_text(json.dumps(runs, indent=1))
                    print(json.dumps(entry), flush=True)
        return 0
    earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    entries = [entry for entry in earlier if entry["seed"] not in seeds]
    for seed in seeds:
        data = party_votes(seed, test=False, cache=arguments.cache)
        entries.append({**run_l1(data, seed=seed, epsilon=None, setting={}), "level": "L0"})
        for epsilon in EPSILONS:
            for setting in grid():
                if setting["noise_ratio"] not in ratios:
                    continue
                for draw in range(arguments.draws):
                    entry = {
                        **run_l1(data, seed=seed, epsilon=epsilon, setting=setting),
                        "level": "L1",
                        "draw": draw,
                    }
                    entries.append(entry)
                    print(json.dumps(entry), flush=True)
                save(entries, RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
