"""FedKT's vote rules under label skew (issue 19, item 3), measured on Adult through the job engine.

``python -m workers.reproduce.fusions [--seeds 3] [--parties 50]``  (validation rows only: for any choice)
``python -m workers.reproduce.fusions --test [--seeds 3]``   (the test split, once, after choosing)

Protocol: the one of :mod:`workers.reproduce.defaults` (Adult train / test / public 75 / 12.5 /
12.5 %, 50 (``--parties``) parties by Dirichlet(0.5) over the training rows, s = 2, t = 5, the product's default
learners on the ordinal view). Without ``--test`` a stratified 15 % of the training split is held
out as the validation set and the test split is never read; with ``--test`` all of the training
split is dealt and the final model is scored on the test split. Each party trains once per seed;
every rule then runs on the same students through the market's engine
(``algorithm_get("fedkt").member_signal`` and ``fuse``, as a job does), each party declaring its
label counts as the silo toolkit does. For reference, ``ensemble-all`` scores the average of every
student's probabilities (Guha's ensemble without selection; not a single model a buyer can run
as cheaply). Results go to ``docs/results/fusions_adult.json`` (``--test``: ``fusions_adult_test.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import balanced_accuracy_score

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.fedkt import FedKTConfig, fit_parties
from workers.algorithms.registry import Member, algorithm_get
from workers.partition import dirichlet_label_partition
from workers.reproduce.defaults import N_PARTIES, PRODUCT_DEFAULTS, adult_protocol_test, adult_without_test
from workers.reproduce.report import mean_std

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "fusions_adult.json"
TEST_RESULTS = RESULTS.with_name("fusions_adult_test.json")
RULES = {   # name: the job's fedkt parameters beyond the defaults
    "consistent_hard": {},
    "class_weighted-W2": {"vote": "class_weighted", "vote_weight_max": 2},
    "class_weighted-W4": {"vote": "class_weighted", "vote_weight_max": 4},
    "class_weighted-W8": {"vote": "class_weighted", "vote_weight_max": 8},
    "soft": {"vote": "soft"},
}


def run_seed(seed: int, *, test: bool, n_parties: int = N_PARTIES) -> list[dict]:
    """Every rule (and the plain ensemble) on one seed's students; one entry per rule."""
    view, teacher, student, final = PRODUCT_DEFAULTS
    data = adult_protocol_test(seed, view) if test else adult_without_test(seed, view)
    parts = dirichlet_label_partition(data["pool_y"], n_parties, beta=0.5, seed=seed, min_size=10)
    started = time.perf_counter()
    parties = fit_parties([(data["pool_x"][part], data["pool_y"][part]) for part in parts], data["public_x"],
                          n_classes=2, config=FedKTConfig(teacher=teacher, student=student, final=final), seed=seed)
    party_seconds = time.perf_counter() - started
    members = [Member(key=str(j), organisation=str(j), n_examples=len(part), validation_score=0.0, n_models=2,
                      label_distribution=tuple(np.bincount(data["pool_y"][part], minlength=2).tolist()))
               for j, part in enumerate(parts)]
    probabilities = [np.stack([model.predict_proba(data["public_x"]) for model in party.students]) for party in parties]
    engine, entries = algorithm_get("fedkt"), []
    for name, rule in RULES.items():
        params = engine.validate({"final_model": final, **rule})
        started = time.perf_counter()
        signal = sum(engine.member_signal(p, member=m, n_classes=2, params=params)
                     for p, m in zip(probabilities, members))
        fusion = engine.fuse(signal, data["public_x"], members=members, n_classes=2, params=params, seed=seed)
        entries.append(_scored(name, seed, fusion.model.predict(data["validation_x"]), data["validation_y"],
                               seconds=time.perf_counter() - started, party_seconds=party_seconds,
                               vote_labels=fusion.labels[fusion.trained], n_parties=n_parties))
    ensemble = np.mean([model.predict_proba(data["validation_x"]) for party in parties for model in party.students],
                       axis=0).argmax(axis=1)
    entries.append(_scored("ensemble-all", seed, ensemble, data["validation_y"], seconds=0.0,
                           party_seconds=party_seconds, vote_labels=None, n_parties=n_parties))
    return entries


def _scored(name: str, seed: int, predicted, truth, *, seconds: float, party_seconds: float, vote_labels,
            n_parties: int) -> dict:
    return {"rule": name, "seed": seed, "parties": n_parties, "parameters": RULES.get(name),
            "accuracy": float(np.mean(predicted == truth)),
            "balanced_accuracy": float(balanced_accuracy_score(truth, predicted)),
            "positive_vote_labels": None if vote_labels is None else float(np.mean(vote_labels == 1)),
            "positive_predictions": float(np.mean(predicted == 1)),
            "fusion_seconds": seconds, "party_seconds": party_seconds}


def save(entries: list[dict], path: Path) -> None:
    runs = json.loads(path.read_text()) if path.exists() else []
    done = {_key(entry) for entry in entries}
    runs = [run for run in runs if _key(run) not in done] + entries
    path.write_text(json.dumps(sorted(runs, key=_key), indent=1))


def _key(run: dict) -> tuple:
    return run.get("parties", N_PARTIES), run["rule"], run["seed"]


def summary(path: Path) -> str:
    """A Markdown table: mean ± sd over the seeds of each rule."""
    runs = json.loads(path.read_text())
    lines = ["| parties | rule | seeds | accuracy (%) | balanced accuracy | '>50K' vote labels (%) |",
             "|---|---|---|---|---|---|"]
    for parties, name in sorted({(run.get("parties", N_PARTIES), name) for run in runs for name in (*RULES, "ensemble-all")},
                                key=lambda pair: (pair[0], [*RULES, "ensemble-all"].index(pair[1]))):
        mine = [run for run in runs if run["rule"] == name and run.get("parties", N_PARTIES) == parties]
        if not mine:
            continue

        accuracy, balanced, minority = (mean_std((run[key] for run in mine), scale=scale) for key, scale in (
            ("accuracy", 100), ("balanced_accuracy", 1), ("positive_vote_labels", 100)))
        lines.append(f"| {parties} | {name} | {len(mine)} | {accuracy} | {balanced} | {minority} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.fusions")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parties", type=int, default=N_PARTIES)
    parser.add_argument("--test", action="store_true", help="score on the test split (once, after choosing)")
    parser.add_argument("--summary", action="store_true", help="print the table of saved results and stop")
    arguments = parser.parse_args(argv)
    path = TEST_RESULTS if arguments.test else RESULTS
    if not arguments.summary:
        for seed in range(arguments.seeds):
            entries = run_seed(seed, test=arguments.test, n_parties=arguments.parties)
            save(entries, path)
            for entry in entries:
                print(json.dumps(entry), flush=True)
    print(summary(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
