"""Choosing FedKT's default learners and feature view for tree families (issue 19), on training and
validation data only.

``python -m workers.reproduce.defaults [--seeds 3] [--configs NAME,...]``
``python -m workers.reproduce.defaults --test [--seeds 3]``

Protocol: Adult split as the paper's protocol does (``workers.datasets``: train / test / public
75 / 12.5 / 12.5 %, seeded, stratified; the feature specification inferred on the public split).
The **test split is never read**. A stratified 15 % of the *training* split is held out as the
validation set; the other 85 % is dealt to 50 parties by a Dirichlet(0.5) label partition, s = 2,
t = 5, FedKT at L0 (:func:`workers.algorithms.fedkt.fedkt_fit`), the final model scored on the
validation set (accuracy, balanced accuracy). Each configuration names the feature view and the
teacher, student and final learners. Results go to ``docs/results/defaults_adult.json`` (one
entry per configuration and seed, replaced on a rerun) and ``docs/results/defaults.md`` reads them.

``--test`` runs once the defaults are chosen: the product's defaults (:data:`PRODUCT_DEFAULTS`: the
silo toolkit's teacher and student, the job API's final model, the ordinal view) under the paper's
protocol as the reproduction runs it, all of the training split dealt to the 50 parties and the
final model scored on the **test** split (``docs/results/defaults_adult_test.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

from workers.algorithms.fedkt import FedKTConfig, fedkt_fit
from workers.datasets import data_dir, tabular_split
from workers.features import encode_features, infer_feature_spec
from workers.partition import dirichlet_label_partition
from workers.reproduce.report import mean_std

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "defaults_adult.json"
TREE = {"family": "decision_tree", "max_depth": 6}
FOREST = {"family": "random_forest", "n_estimators": 100, "max_depth": 6}
CONFIGS = {  # name: (view, teacher, student, final)
    "forest-onehot": ("one_hot", FOREST, FOREST, FOREST),
    "forest-ordinal": ("ordinal", FOREST, FOREST, FOREST),
    "tree-teacher-onehot": ("one_hot", TREE, FOREST, FOREST),
    "tree-teacher-ordinal": ("ordinal", TREE, FOREST, FOREST),
    "tree-all-ordinal": ("ordinal", TREE, TREE, TREE),
    "balanced-teacher-ordinal": ("ordinal", {**TREE, "class_weight": "balanced"}, FOREST, FOREST),
    "balanced-teacher-student-ordinal": (
        "ordinal",
        {**TREE, "class_weight": "balanced"},
        {**FOREST, "class_weight": "balanced"},
        FOREST,
    ),
}
#: The product's defaults as a user gets them (workers/silo/training.py; the job API's final model).
PRODUCT_DEFAULTS = (
    "ordinal",
    TREE,
    {**FOREST, "n_estimators": 25},  # 25 student trees since issue 18
    {"family": "random_forest", "n_estimators": 100, "max_depth": 8},
)
TEST_RESULTS = RESULTS.with_name("defaults_adult_test.json")
VALIDATION_FRACTION = 0.15
N_PARTIES = 50


def adult_protocol_test(seed: int, view: str) -> dict:
    """The whole training split as the parties' pool, the public split, and the test split, in ``view``."""
    frame = pd.read_parquet(data_dir() / "adult.parquet")
    labels = (frame.pop("income").str.strip().str.rstrip(".") == ">50K").to_numpy().astype(np.int64)
    train, public, test = tabular_split(len(frame), labels, seed)
    features = encode_features(frame, infer_feature_spec(frame.iloc[public]), view=view)
    return {
        "pool_x": features[train],
        "pool_y": labels[train],
        "validation_x": features[test],
        "validation_y": labels[test],
        "public_x": features[public],
    }


def adult_without_test(seed: int, view: str) -> dict:
    """Parties' pool, validation and public features of Adult in ``view``; the test rows are dropped."""
    frame = pd.read_parquet(data_dir() / "adult.parquet")
    labels = (frame.pop("income").str.strip().str.rstrip(".") == ">50K").to_numpy().astype(np.int64)
    train, public, _test = tabular_split(len(frame), labels, seed)
    pool, validation = train_test_split(
        train, test_size=VALIDATION_FRACTION, random_state=seed, stratify=labels[train]
    )
    features = encode_features(frame, infer_feature_spec(frame.iloc[public]), view=view)
    return {
        "pool_x": features[pool],
        "pool_y": labels[pool],
        "validation_x": features[validation],
        "validation_y": labels[validation],
        "public_x": features[public],
    }


def run_config(name: str, seed: int, *, test: bool = False) -> dict:
    """One FedKT run; scored on the validation rows, or with ``test`` on the test split (product defaults)."""
    view, teacher, student, final = PRODUCT_DEFAULTS if test else CONFIGS[name]
    data = adult_protocol_test(seed, view) if test else adult_without_test(seed, view)
    parts = dirichlet_label_partition(data["pool_y"], N_PARTIES, beta=0.5, seed=seed, min_size=10)
    parties = [(data["pool_x"][part], data["pool_y"][part]) for part in parts]
    started = time.perf_counter()
    result = fedkt_fit(
        parties,
        data["public_x"],
        n_classes=2,
        seed=seed,
        config=FedKTConfig(teacher=teacher, student=student, final=final),
    )
    predicted = result.final_model.predict(data["validation_x"])
    labels = result.server.labels[result.server.trained]
    return {
        "config": name,
        "seed": seed,
        "view": view,
        "teacher": teacher,
        "student": student,
        "final": final,
        "validation_accuracy": float(np.mean(predicted == data["validation_y"])),
        "validation_balanced_accuracy": float(
            balanced_accuracy_score(data["validation_y"], predicted)
        ),
        "positive_vote_labels": float(np.mean(labels == 1)),
        "positive_predictions": float(np.mean(predicted == 1)),
        "wall_seconds": time.perf_counter() - started,
    }


def save(entry: dict, path: Path) -> None:
    runs = json.loads(path.read_text()) if path.exists() else []
    runs = [
        run for run in runs if (run["config"], run["seed"]) != (entry["config"], entry["seed"])
    ] + [entry]
    path.write_text(
        json.dumps(sorted(runs, key=lambda run: (run["config"], run["seed"])), indent=1)
    )


def summary(path: Path = RESULTS) -> str:
    """A Markdown table: mean ± sd over the seeds of each configuration."""
    runs = json.loads(path.read_text())
    lines = [
        "| configuration | view | teacher / student / final | seeds | validation accuracy (%) | "
        "balanced accuracy | '>50K' vote labels (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CONFIGS:
        mine = [run for run in runs if run["config"] == name]
        if not mine:
            continue
        view, teacher, student, final = CONFIGS[name]
        learners = " / ".join(
            learner["family"].replace("_", " ") for learner in (teacher, student, final)
        )

        accuracy, balanced, minority = (
            mean_std((run[key] for run in mine), scale=scale)
            for key, scale in (
                ("validation_accuracy", 100),
                ("validation_balanced_accuracy", 1),
                ("positive_vote_labels", 100),
            )
        )
        lines.append(
            f"| {name} | {view} | {learners} | {len(mine)} | {accuracy} | {balanced} | {minority} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.defaults")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help=f"comma-separated of {', '.join(CONFIGS)}"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print the table of saved results and stop"
    )
    parser.add_argument(
        "--test", action="store_true", help="score the product defaults on the test split, once"
    )
    arguments = parser.parse_args(argv)
    if arguments.test:
        for seed in range(arguments.seeds):
            entry = {
                **run_config("product-defaults", seed, test=True),
                "config": "product-defaults",
            }
            entry["test_accuracy"] = entry.pop("validation_accuracy")  # scored on the test split
            entry["test_balanced_accuracy"] = entry.pop("validation_balanced_accuracy")
            save(entry, TEST_RESULTS)
            print(json.dumps(entry), flush=True)
        return 0
    if not arguments.summary:
        for seed in range(arguments.seeds):
            for name in arguments.configs.split(","):
                entry = run_config(name, seed)
                save(entry, RESULTS)
                print(json.dumps(entry), flush=True)
    print(summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
