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

With ``--test`` the test split also plays the federation's evaluation split for ``vote: auto``
(:mod:`workers.algorithms.auto_fusion`): ``auto`` chooses on one stratified half of it and is scored on the
other half (rule ``auto``); every rule and the selected ensemble are scored on that same report half too
(rules ``<name>@report``), so the choice can be compared with what each candidate would have given. Each
party declares as its local validation score its students' mean accuracy on its own rows (the reproduction's
parties hold out no rows), which Guha's selection ranks.
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
from workers.algorithms.auto_fusion import AUTO_CANDIDATES
from workers.algorithms.ensemble import average_probabilities, stacked_probabilities
from workers.algorithms.fedkt import FedKTConfig, fit_parties
from workers.algorithms.registry import Member, algorithm_get
from workers.partition import dirichlet_label_partition
from workers.reproduce.defaults import (
    N_PARTIES,
    PRODUCT_DEFAULTS,
    adult_protocol_test,
    adult_without_test,
)
from workers.reproduce.report import mean_std

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "fusions_adult.json"
TEST_RESULTS = RESULTS.with_name("fusions_adult_test.json")
RULES = {  # name: the job's fedkt parameters beyond the defaults
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
    parties = fit_parties(
        [(data["pool_x"][part], data["pool_y"][part]) for part in parts],
        data["public_x"],
        n_classes=2,
        config=FedKTConfig(teacher=teacher, student=student, final=final),
        seed=seed,
    )
    party_seconds = time.perf_counter() - started
    members = [
        Member(
            key=str(j),
            organisation=str(j),
            n_examples=len(part),
            validation_score=0.0,
            n_models=2,
            label_distribution=tuple(np.bincount(data["pool_y"][part], minlength=2).tolist()),
        )
        for j, part in enumerate(parts)
    ]
    probabilities = [
        np.stack([model.predict_proba(data["public_x"]) for model in party.students])
        for party in parties
    ]
    engine, entries = algorithm_get("fedkt"), []
    for name, rule in RULES.items():
        params = engine.validate({"final_model": final, **rule})
        started = time.perf_counter()
        signal = sum(
            engine.member_signal(p, member=m, n_classes=2, params=params)
            for p, m in zip(probabilities, members)
        )
        fusion = engine.fuse(
            signal, data["public_x"], members=members, n_classes=2, params=params, seed=seed
        )
        entries.append(
            _scored(
                name,
                seed,
                fusion.model.predict(data["validation_x"]),
                data["validation_y"],
                seconds=time.perf_counter() - started,
                party_seconds=party_seconds,
                vote_labels=fusion.labels[fusion.trained],
                n_parties=n_parties,
            )
        )
    students = [model for party in parties for model in party.students]
    ensemble = average_probabilities(
        stacked_probabilities(students, data["validation_x"], 2)
    ).argmax(axis=1)
    entries.append(
        _scored(
            "ensemble-all",
            seed,
            ensemble,
            data["validation_y"],
            seconds=0.0,
            party_seconds=party_seconds,
            vote_labels=None,
            n_parties=n_parties,
        )
    )
    if test:
        entries.extend(
            _auto_entries(
                engine,
                final,
                parties,
                parts,
                data,
                probabilities,
                seed=seed,
                party_seconds=party_seconds,
                n_parties=n_parties,
            )
        )
    return entries


def _auto_entries(
    engine,
    final,
    parties,
    parts,
    data,
    probabilities,
    *,
    seed: int,
    party_seconds: float,
    n_parties: int,
) -> list[dict]:
    """``vote: auto`` chosen on one half of the test split and scored on the other; every candidate on that half."""
    from workers.algorithms.auto_fusion import (
        AUTO_VOTE_RULES,
        EvaluationRows,
        ensemble_members,
        evaluation_halves,
    )
    from workers.algorithms.ensemble import member_probabilities

    members = [
        Member(
            key=str(j),
            organisation=str(j),
            n_examples=len(part),
            n_models=2,
            validation_score=float(
                np.mean(
                    [
                        np.mean(model.predict(data["pool_x"][part]) == data["pool_y"][part])
                        for model in party.students
                    ]
                )
            ),
            label_distribution=tuple(np.bincount(data["pool_y"][part], minlength=2).tolist()),
        )
        for j, (part, party) in enumerate(zip(parts, parties))
    ]
    evaluated = np.stack(
        [
            np.mean(
                [member_probabilities(model, data["validation_x"], 2) for model in party.students],
                axis=0,
            )
            for party in parties
        ]
    )
    evaluation = EvaluationRows(data["validation_x"], data["validation_y"], evaluated)
    _, report = evaluation_halves(data["validation_y"], seed=seed)
    truth = data["validation_y"][report]
    params = engine.validate({"final_model": final, "vote": "auto"})
    started = time.perf_counter()
    signal = sum(
        engine.member_signal(p, member=m, n_classes=2, params=params)
        for p, m in zip(probabilities, members)
    )
    fusion = engine.fuse(
        signal,
        data["public_x"],
        members=members,
        n_classes=2,
        params=params,
        seed=seed,
        evaluation=evaluation,
    )
    seconds = time.perf_counter() - started
    predicted = (
        average_probabilities(evaluated, ensemble_members(members))
        if fusion.model is None
        else fusion.model.predict_proba(data["validation_x"])
    ).argmax(axis=1)[report]
    entry = _scored(
        "auto",
        seed,
        predicted,
        truth,
        seconds=seconds,
        party_seconds=party_seconds,
        vote_labels=fusion.labels[fusion.trained] if fusion.trained.any() else None,
        n_parties=n_parties,
    )
    entries = [
        {**entry, "chosen": fusion.details["auto"]["chosen"], "selection": fusion.details["auto"]}
    ]
    for (
        rule
    ) in AUTO_VOTE_RULES:  # what each candidate gives on the report half (the same fits auto made)
        rule_params = engine.validate(
            {"final_model": final, **({"vote": rule} if rule != "consistent_hard" else {})}
        )
        rule_signal = sum(
            engine.member_signal(p, member=m, n_classes=2, params=rule_params)
            for p, m in zip(probabilities, members)
        )
        rule_fusion = engine.fuse(
            rule_signal,
            data["public_x"],
            members=members,
            n_classes=2,
            params=rule_params,
            seed=seed,
        )
        entries.append(
            _scored(
                f"{rule}@report",
                seed,
                rule_fusion.model.predict(data["validation_x"])[report],
                truth,
                seconds=0.0,
                party_seconds=party_seconds,
                vote_labels=rule_fusion.labels[rule_fusion.trained],
                n_parties=n_parties,
            )
        )
    selected = average_probabilities(evaluated, ensemble_members(members)).argmax(axis=1)[report]
    entries.append(
        _scored(
            "ensemble_selected@report",
            seed,
            selected,
            truth,
            seconds=0.0,
            party_seconds=party_seconds,
            vote_labels=None,
            n_parties=n_parties,
        )
    )
    return entries


def _scored(
    name: str,
    seed: int,
    predicted,
    truth,
    *,
    seconds: float,
    party_seconds: float,
    vote_labels,
    n_parties: int,
) -> dict:
    return {
        "rule": name,
        "seed": seed,
        "parties": n_parties,
        "parameters": RULES.get(name),
        "accuracy": float(np.mean(predicted == truth)),
        "balanced_accuracy": float(balanced_accuracy_score(truth, predicted)),
        "positive_vote_labels": None if vote_labels is None else float(np.mean(vote_labels == 1)),
        "positive_predictions": float(np.mean(predicted == 1)),
        "fusion_seconds": seconds,
        "party_seconds": party_seconds,
    }


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
    lines = [
        "| parties | rule | seeds | accuracy (%) | balanced accuracy | '>50K' vote labels (%) |",
        "|---|---|---|---|---|---|",
    ]
    names = [*RULES, "ensemble-all", "auto", *(f"{rule}@report" for rule in AUTO_CANDIDATES)]
    for parties, name in sorted(
        {(run.get("parties", N_PARTIES), name) for run in runs for name in names},
        key=lambda pair: (pair[0], names.index(pair[1])),
    ):
        mine = [
            run for run in runs if run["rule"] == name and run.get("parties", N_PARTIES) == parties
        ]
        if not mine:
            continue

        accuracy, balanced, minority = (
            mean_std((run[key] for run in mine), scale=scale)
            for key, scale in (
                ("accuracy", 100),
                ("balanced_accuracy", 1),
                ("positive_vote_labels", 100),
            )
        )
        chosen = ", ".join(
            run["chosen"] for run in sorted(mine, key=lambda run: run["seed"]) if "chosen" in run
        )
        lines.append(
            f"| {parties} | {name}{f' (chose: {chosen})' if chosen else ''} | {len(mine)} | {accuracy} | "
            f"{balanced} | {minority} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.fusions")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parties", type=int, default=N_PARTIES)
    parser.add_argument(
        "--test", action="store_true", help="score on the test split (once, after choosing)"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print the table of saved results and stop"
    )
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
