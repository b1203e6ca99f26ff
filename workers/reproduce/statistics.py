"""The statistics kind on Adult (issue 40): closed-form heads from the silos' sufficient statistics, L0 against L2.

``python -m workers.reproduce.statistics --seeds 3 --silos 1 4 10``               (the test split, once)
``python -m workers.reproduce.statistics --validation --seeds 3 --silos 1 4 10``  (validation rows: the choice)

Protocol: Adult's paper split (:mod:`workers.reproduce.defaults`, one-hot view, the specification inferred on the
public split); the training split dealt to the silos by a Dirichlet(0.5) label partition (one silo: all of it).
Each silo computes its statistics of rows clipped to the clip norm (:mod:`workers.algorithms.sufficient_statistics`);
L0 fits the heads on their exact sum, L2 on the sum of each silo's statistics with its own example-level Gaussian
noise at ε (δ 1e-5, one release, :func:`workers.privacy.statistics_noise.statistics_noise_calibrated`). The L2
heads project the noisy scatter onto the PSD cone and regularise with λ = κ · σ_total, σ_total the summed noise's
standard deviation on one entry of the second moment, which the silos' declarations make public. κ, the clip norm
and the noise shares were chosen with ``--validation`` (the test split unread); the default run reads the test split
once. The noise is OpenDP's and is not seeded, so the seeds repeat the split and the partition, not the noise.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from workers.algorithms.statistics_heads import (
    EXACT_REGULARIZATION,
    NOISE_REGULARIZATION_FACTOR,
    StatisticsHead,
    noise_scaled_regularization,
)
from workers.algorithms.sufficient_statistics import (
    class_statistics,
    clipped_scaled,
    statistics_noised,
    statistics_sum,
)
from workers.features import ONE_HOT_VIEW
from workers.partition import dirichlet_label_partition
from workers.privacy.statistics_noise import statistics_noise_calibrated
from workers.reproduce.defaults import adult_protocol_test, adult_without_test

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "statistics.json"
CLIP_NORM, DELTA = 2.0, 1e-5
HEADS = ("lda", "ridge")


def silo_parts(labels: np.ndarray, n_silos: int, *, seed: int) -> list[np.ndarray]:
    """Row indices of each silo: all rows for one silo, else a Dirichlet(0.5) label partition."""
    if n_silos == 1:
        return [np.arange(len(labels))]
    return dirichlet_label_partition(labels, n_silos, beta=0.5, seed=seed, min_size=10)


def run_setting(data: dict, *, n_silos: int, seed: int, epsilon: float, kappas) -> list[dict]:
    """Accuracy of each head at L0 and at L2 (one λ per κ) on the scored rows of one seed and silo count."""
    features, labels = data["pool_x"], data["pool_y"]
    scored_x, scored_y = data["validation_x"], data["validation_y"]
    silos = [
        class_statistics(
            features[part], labels[part], n_classes=2, clip_norm=CLIP_NORM, squares=False
        )
        for part in silo_parts(labels, n_silos, seed=seed)
    ]
    noise = statistics_noise_calibrated(epsilon=epsilon, delta=DELTA)
    started = time.perf_counter()
    exact = statistics_sum(silos)
    noisy = statistics_sum([statistics_noised(silo, noise=noise) for silo in silos])
    noise_seconds = time.perf_counter() - started
    central = LinearDiscriminantAnalysis(solver="lsqr").fit(
        clipped_scaled(features, clip_norm=CLIP_NORM), labels
    )
    central_accuracy = float(
        np.mean(central.predict(clipped_scaled(scored_x, clip_norm=CLIP_NORM)) == scored_y)
    )
    rows = []
    for head in HEADS:
        l0 = StatisticsHead(head, regularization=EXACT_REGULARIZATION).fit_statistics(exact)
        accuracy_l0 = float(np.mean(l0.predict(scored_x) == scored_y))
        for kappa in kappas:
            regularization = noise_scaled_regularization(
                moment_sigmas=[noise.moment] * n_silos, factor=kappa
            )
            l2 = StatisticsHead(head, regularization=regularization, positive=True)
            accuracy_l2 = float(np.mean(l2.fit_statistics(noisy).predict(scored_x) == scored_y))
            rows.append(
                {
                    "seed": seed,
                    "silos": n_silos,
                    "head": head,
                    "kappa": kappa,
                    "regularization": regularization,
                    "epsilon": noise.epsilon,
                    "delta": DELTA,
                    "unit": "example",
                    "accuracy_l0": accuracy_l0,
                    "accuracy_l2": accuracy_l2,
                    "central_lda_accuracy": central_accuracy,
                    "noise_seconds": noise_seconds,
                    "sigma_moment": noise.moment,
                }
            )
    return rows


def summary_table(rows: list[dict]) -> str:
    """The markdown table: mean ± sd over seeds of L0, L2 and L2 − L0 by head, silos and κ."""
    lines = [
        "| head | silos | κ | L0 accuracy (%) | L2 accuracy (%), ε 1 example-level | L2 − L0 (points) | target met |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(row["head"], row["silos"], row["kappa"]) for row in rows})
    for head, silos, kappa in keys:
        group = [
            row for row in rows if (row["head"], row["silos"], row["kappa"]) == (head, silos, kappa)
        ]
        l0 = 100 * np.array([row["accuracy_l0"] for row in group])
        l2 = 100 * np.array([row["accuracy_l2"] for row in group])
        gap = l2 - l0
        lines.append(
            f"| {head} | {silos} | {kappa:g} | {l0.mean():.2f} ± {l0.std():.2f} | {l2.mean():.2f} ± {l2.std():.2f} "
            f"| {gap.mean():+.2f} ± {gap.std():.2f} | {'yes' if gap.mean() >= -1 else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.reproduce.statistics", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--silos", type=int, nargs="+", default=[1, 4, 10])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--kappas", type=float, nargs="+", default=[NOISE_REGULARIZATION_FACTOR])
    parser.add_argument(
        "--validation", action="store_true", help="score on validation rows (the test split unread)"
    )
    parser.add_argument(
        "--output", type=Path, help=f"JSON of every run (default {RESULTS.name} beside the doc)"
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()
    started = time.perf_counter()
    rows = []
    for seed in range(args.seeds):
        data = (
            adult_without_test(seed, ONE_HOT_VIEW)
            if args.validation
            else adult_protocol_test(seed, ONE_HOT_VIEW)
        )
        for n_silos in args.silos:
            rows += run_setting(
                data, n_silos=n_silos, seed=seed, epsilon=args.epsilon, kappas=args.kappas
            )
            print(f"seed {seed}, {n_silos} silo(s) done", flush=True)
    output = args.output or RESULTS.with_name(
        "statistics_validation.json" if args.validation else "statistics_test.json"
    )
    output.write_text(json.dumps({"rows": rows, "load_average": load}, indent=1))
    print(summary_table(rows))
    print(
        f"\n{time.perf_counter() - started:.0f} s; load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
