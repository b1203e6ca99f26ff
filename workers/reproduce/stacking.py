"""Choosing the stacked fusion's aggregator (issue 31) on validation rows only, through the job engine.

``python -m workers.reproduce.stacking [--seeds 2] [--silos 10] [--datasets banana,segment,...]``

Protocol, per data set of the tabular suite (``../shared/data/keel``, :data:`DATASETS`) and Adult, per seed: a
seeded stratified split into silo rows (60 %), public rows whose labels are dropped (20 %), the federation's
evaluation split (10 %) and **validation** rows (10 %) that play the unseen data; no test split exists here, and
none of the issue's held-out data sets is read. The silo rows are dealt to ``--silos`` silos by a Dirichlet(0.5)
label partition (at least 10 rows each); each silo trains its own random forest on all its rows (:data:`SILO_MODEL`,
the model a silo uploads as its best). Every fusion then runs on the same members through the market's engine as
a job does (``algorithm_get(kind).member_signal`` per member, summed, ``fuse`` with an
:class:`~workers.algorithms.auto_fusion.EvaluationRows` holding every member's own signal), and its global model is
scored on the validation rows:

- ``ensemble``: the members' averaged probabilities (the ensemble kind's global model);
- ``stack-logistic``, ``stack-weights``, ``stack-auto``: the stack kind with that aggregator and its default final
  model, fitted on one half of the evaluation split;
- ``best-silo``: the silo whose model scores the best accuracy on the evaluation split, scored on the validation
  rows (what a buyer could have had from one silo); ``centralised``: :data:`SILO_MODEL` on all silo rows pooled.

Results go to ``docs/results/stack_validation.json`` (one entry per data set, seed and fusion; ``--output`` writes
elsewhere) and the summary table to stdout (mean accuracy / balanced accuracy over seeds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.auto_fusion import EvaluationRows
from workers.algorithms.ensemble import member_probabilities
from workers.algorithms.registry import Member, algorithm_get
from workers.datasets import data_dir
from workers.features import encode_features, infer_feature_spec
from workers.partition import dirichlet_label_partition

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "stack_validation.json"
DATASETS = (
    "twonorm",
    "banana",
    "segment",
    "marketing",
    "splice",
    "titanic",
    "page-blocks0",
    "adult",
)
SILO_MODEL = {"n_estimators": 100, "min_samples_leaf": 2}
STACKS = {"stack-logistic": "logistic", "stack-weights": "weights", "stack-auto": "auto"}


def load_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Encoded features (the ordinal view of the product's inferred specification) and 0-based labels."""
    if name == "adult":
        frame = pd.read_parquet(data_dir() / "adult.parquet")
        labels = frame.pop("income").str.strip().str.rstrip(".").to_numpy()
    else:
        frame = pd.read_csv(
            data_dir() / "keel" / f"{name}.dat", header=None, skipinitialspace=True, comment="@"
        )
        labels = frame.pop(frame.columns[-1]).astype(str).str.strip().to_numpy()
        frame.columns = [f"x{index}" for index in range(frame.shape[1])]
    _, encoded = np.unique(labels, return_inverse=True)
    return encode_features(frame, infer_feature_spec(frame), view="ordinal"), encoded.astype(
        np.int64
    )


def _split(labels: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Silo 60 % / public 20 % / evaluation 10 % / validation 10 %, stratified and seeded."""
    rows = np.arange(len(labels))
    silo, rest = train_test_split(rows, train_size=0.6, random_state=seed, stratify=labels)
    public, rest = train_test_split(rest, train_size=0.5, random_state=seed, stratify=labels[rest])
    evaluation, validation = train_test_split(
        rest, train_size=0.5, random_state=seed, stratify=labels[rest]
    )
    return {"silo": silo, "public": public, "evaluation": evaluation, "validation": validation}


def _forest(features, labels, n_classes: int, seed: int):
    model = RandomForestClassifier(**SILO_MODEL, random_state=seed, n_jobs=1).fit(features, labels)
    return model


def run(name: str, seed: int, *, n_silos: int, stacks=tuple(STACKS)) -> list[dict]:
    """Every fusion of one data set and seed, scored on its validation rows; one entry per fusion."""
    features, labels = load_table(name)
    n_classes = int(labels.max()) + 1
    split = _split(labels, seed)
    silo_rows = split["silo"]
    parts = dirichlet_label_partition(labels[silo_rows], n_silos, beta=0.5, seed=seed, min_size=10)
    models = [
        _forest(features[silo_rows[part]], labels[silo_rows[part]], n_classes, seed + index)
        for index, part in enumerate(parts)
    ]
    members = [
        Member(key=str(index), organisation=str(index), n_examples=len(part), validation_score=0.0)
        for index, part in enumerate(parts)
    ]

    def predicted(rows):
        return np.stack(
            [member_probabilities(model, features[rows], n_classes) for model in models]
        )

    public, evaluation, validation = (
        predicted(split[part]) for part in ("public", "evaluation", "validation")
    )
    truth = labels[split["validation"]]

    def entry(fusion: str, probabilities, **extra) -> dict:
        guess = np.asarray(probabilities).argmax(axis=1)
        return {
            "dataset": name,
            "seed": seed,
            "silos": n_silos,
            "fusion": fusion,
            "accuracy": float(np.mean(guess == truth)),
            "balanced_accuracy": float(balanced_accuracy_score(truth, guess)),
            **extra,
        }

    evaluation_accuracy = [
        np.mean(member.argmax(axis=1) == labels[split["evaluation"]]) for member in evaluation
    ]
    entries = [
        entry("best-silo", validation[int(np.argmax(evaluation_accuracy))]),
        entry("ensemble", validation.mean(axis=0)),
        entry(
            "centralised",
            member_probabilities(
                _forest(features[silo_rows], labels[silo_rows], n_classes, seed),
                features[split["validation"]],
                n_classes,
            ),
        ),
    ]
    engine = algorithm_get("stack")
    for fusion_name in stacks:
        aggregator = STACKS[fusion_name]
        params = engine.validate({"aggregator": aggregator})
        signals = np.stack(
            [
                engine.member_signal(p[None], member=m, n_classes=n_classes, params=params)
                for p, m in zip(public, members)
            ]
        )
        started = time.perf_counter()
        try:
            fusion = engine.fuse(
                signals.sum(axis=0),
                features[split["public"]],
                members=members,
                n_classes=n_classes,
                params=params,
                seed=seed,
                evaluation=EvaluationRows(
                    features[split["evaluation"]],
                    labels[split["evaluation"]],
                    evaluation,
                    member_signals=signals,
                ),
            )
        except ValueError as error:
            entries.append(
                {"dataset": name, "seed": seed, "fusion": fusion_name, "refused": str(error)}
            )
            continue
        entries.append(
            entry(
                fusion_name,
                member_probabilities(fusion.model, features[split["validation"]], n_classes),
                seconds=round(time.perf_counter() - started, 2),
                chosen=fusion.details["stack"]["aggregator"],
            )
        )
    return entries


def summary(entries: list[dict]) -> str:
    """A markdown table: per data set, each fusion's mean accuracy % / balanced accuracy over the seeds."""
    fusions = ["best-silo", "ensemble", *STACKS, "centralised"]
    lines = [
        "| data set | " + " | ".join(fusions) + " |",
        "|---" * (len(fusions) + 1) + "|",
    ]
    for name in dict.fromkeys(entry["dataset"] for entry in entries):
        cells = []
        for fusion in fusions:
            scored = [
                e
                for e in entries
                if e["dataset"] == name and e["fusion"] == fusion and "accuracy" in e
            ]
            ran = any(e["dataset"] == name and e["fusion"] == fusion for e in entries)
            cells.append(
                f"{100 * np.mean([e['accuracy'] for e in scored]):.1f} / "
                f"{np.mean([e['balanced_accuracy'] for e in scored]):.3f}"
                if scored
                else "refused"
                if ran
                else "–"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--silos", type=int, default=10)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--stacks", default=",".join(STACKS), help="the stack variants to run")
    arguments = parser.parse_args(argv)
    entries = [
        entry
        for name in arguments.datasets.split(",")
        for seed in range(arguments.seeds)
        for entry in run(name, seed, n_silos=arguments.silos, stacks=arguments.stacks.split(","))
    ]
    arguments.output.write_text(json.dumps(entries, indent=1) + "\n")
    print(summary(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
