"""Contribution values under attack (issue 28): a constant, a label-flipped and a copied silo on Adult.

``python -m workers.reproduce.valuation [--silos 20] [--seed 0] [--permutations 500] [--output PATH]``

Protocol: Adult's seeded split (:func:`workers.datasets.load_adult`); the training rows are dealt IID to
``--silos`` silos, each fitting a logistic regression on at most :data:`SILO_ROWS` of its rows. The values are
measured on the public split's rows (which no silo fits; the test split is not read), with the job's hard vote
(``vote``) and its average (``average``), by :func:`workers.valuation.contribution_values`. Three silos attack:

- ``constant``: silo 1 uploads a model that always answers the majority class;
- ``flipped``: silo 2 trains on its rows with every label flipped;
- ``copy``: silo 4 uploads silo 3's model; the copy's game is compared with the same federation without silo 4
  (``original_alone``: silo 3's value there). ``closest_honest_pair``: the smallest mean absolute difference of two
  honest silos' probabilities, against the copy tolerance (:data:`workers.valuation.DUPLICATE_TOLERANCE`).

And the estimator's agreement: at :data:`EXACT_CHECK_SILOS` honest silos the exact Shapley value against
permutation sampling with ``--permutations`` orders (Spearman rank correlation, balanced accuracy). Each valuation's
wall time is printed (the time to value, not compared here with a job's own wall time). Results go to ``--output``
(default ``docs/results/valuation.json``) and a table to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression

from workers.datasets import REPOSITORY_ROOT, load_adult
from workers.partition import iid_partition
from workers.valuation import (
    DUPLICATE_TOLERANCE,
    contribution_values,
    permutation_shapley,
    silo_scores,
)

SILO_ROWS = 1500
EXACT_CHECK_SILOS = 12
RESULTS = REPOSITORY_ROOT / "docs" / "results" / "valuation.json"


def _silo_models(data, n_silos: int, seed: int) -> list[np.ndarray]:
    """Each honest silo's probabilities on the public rows, then the attackers' in place of silos 1, 2 and 4."""
    parts = iid_partition(len(data.train_y), n_silos, seed=seed)
    probabilities = []
    for index, part in enumerate(parts):
        rows = part[:SILO_ROWS]
        labels = data.train_y[rows]
        if index == 1:  # flipped
            labels = 1 - labels
        model = LogisticRegression(max_iter=500).fit(data.train_x[rows], labels)
        probabilities.append(model.predict_proba(data.public_x))
    constant = np.zeros_like(probabilities[0])
    constant[:, 0] = 1.0  # '<=50K', the majority class
    probabilities[0] = constant
    probabilities[3] = probabilities[2].copy()  # the copy of silo 3's model
    return probabilities


def _values(probabilities: list[np.ndarray], labels, *, rule: str, seed: int, permutations: int):
    members = {f"{index + 1:02d}": [p] for index, p in enumerate(probabilities)}
    started = time.perf_counter()
    values = contribution_values(
        members, labels, rule=rule, n_classes=2, seed=seed, permutations=permutations
    )
    return values, time.perf_counter() - started


def _value(values: dict, silo: int) -> float:
    return values["silos"][f"{silo:02d}"]["shapley"]["balanced_accuracy"]


def closest_honest_pair(probabilities: list[np.ndarray]) -> float:
    """The smallest mean absolute difference of two honest silos' (5 onwards) probabilities."""
    honest = probabilities[4:]
    return min(
        float(np.abs(honest[first] - honest[second]).mean())
        for first in range(len(honest))
        for second in range(first + 1, len(honest))
    )


def run(n_silos: int, seed: int, permutations: int) -> list[dict]:
    data = load_adult(seed)
    labels = data.public_y
    probabilities = _silo_models(data, n_silos, seed)
    entries = []
    closest = closest_honest_pair(probabilities)
    for rule in ("vote", "average"):
        values, seconds = _values(
            probabilities, labels, rule=rule, seed=seed, permutations=permutations
        )
        without_copy, _ = _values(
            probabilities[:3] + probabilities[4:],
            labels,
            rule=rule,
            seed=seed,
            permutations=permutations,
        )
        honest = [_value(values, silo) for silo in range(5, n_silos + 1)]
        entries.append(
            {
                "silos": n_silos,
                "seed": seed,
                "rule": rule,
                "estimator": values["estimator"],
                "permutations": values["permutations"],
                "seconds": round(seconds, 3),
                "constant": _value(values, 1),
                "flipped": _value(values, 2),
                "original": _value(values, 3),
                "copy": _value(values, 4),
                "original_alone": _value(without_copy, 3),
                "honest_median": float(np.median(honest)),
                "honest_min": float(np.min(honest)),
                "grand_coalition": values["grand_coalition"]["balanced_accuracy"],
                "duplicates": values["duplicates"],
                "closest_honest_pair": closest,
                "duplicate_tolerance": DUPLICATE_TOLERANCE,
            }
        )
    return entries


def estimator_agreement(seed: int, permutations: int, n_silos: int = EXACT_CHECK_SILOS) -> dict:
    """Spearman correlation of exact and sampled values at ``n_silos`` honest silos, per rule."""
    data = load_adult(seed)
    parts = iid_partition(len(data.train_y), n_silos, seed=seed)
    members = {}
    for index, part in enumerate(parts):
        rows = part[: max(50, SILO_ROWS // (index + 1))]  # unequal silos, so that the values differ
        model = LogisticRegression(max_iter=500).fit(data.train_x[rows], data.train_y[rows])
        members[f"{index + 1:02d}"] = [model.predict_proba(data.public_x)]
    agreement = {}
    for rule in ("vote", "average"):
        exact = contribution_values(members, data.public_y, rule=rule, n_classes=2)
        silos, scores = silo_scores(members, rule=rule, n_classes=2)
        sampled, _ = permutation_shapley(
            scores, data.public_y, n_classes=2, permutations=permutations, seed=seed
        )
        exact_values = [exact["silos"][silo]["shapley"]["balanced_accuracy"] for silo in silos]
        agreement[rule] = float(spearmanr(exact_values, sampled["balanced_accuracy"]).statistic)
    return {"silos": n_silos, "permutations": permutations, "spearman": agreement}


def summary(entries: list[dict], agreement: dict) -> str:
    lines = [
        "| silos | rule | estimator | constant | flipped | original | copy | original alone | "
        "honest median | honest min | seconds | copies found | closest honest pair |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        lines.append(
            f"| {entry['silos']} | {entry['rule']} | {entry['estimator']} | {entry['constant']:.4f} | "
            f"{entry['flipped']:.4f} | {entry['original']:.4f} | {entry['copy']:.4f} | "
            f"{entry['original_alone']:.4f} | {entry['honest_median']:.4f} | {entry['honest_min']:.4f} | "
            f"{entry['seconds']:.2f} | {entry['duplicates']} | {entry['closest_honest_pair']:.4f} |"
        )
    lines.append(
        f"\nExact vs permutation sampling ({agreement['permutations']} orders) at {agreement['silos']} silos, "
        "Spearman: "
        + ", ".join(f"{rule} {value:.3f}" for rule, value in agreement["spearman"].items())
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silos", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--permutations", type=int, default=500)
    parser.add_argument("--exact-check-silos", type=int, default=EXACT_CHECK_SILOS)
    parser.add_argument("--output", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    if arguments.silos < 5:
        parser.error("--silos must be at least 5 (three attackers, an original and an honest silo)")
    entries = run(arguments.silos, arguments.seed, arguments.permutations)
    agreement = estimator_agreement(
        arguments.seed, arguments.permutations, n_silos=arguments.exact_check_silos
    )
    arguments.output.write_text(
        json.dumps({"attacks": entries, "estimator_agreement": agreement}, indent=1) + "\n"
    )
    print(summary(entries, agreement))
    return 0


if __name__ == "__main__":
    sys.exit(main())
