"""Speed ratios Onefold's design relies on, each measured in one run on this machine.

    .venv/bin/python benchmarks/speed.py > benchmarks/speed.md

1. Consistent voting vectorised over examples (``workers.algorithms.voting``) against a
   per-example Python loop, on 50 parties × s = 2 students × 6,105 public examples (Adult's
   public split).
2. Validating 8 uploaded models in one sandbox child (``predict_in_sandbox`` batches) against
   one child per model, on real XGBoost models and 256 rows.

Every measurement is the median of ``REPEATS`` runs; the two sides of a ratio run back to back.
"""

import statistics
import time

import numpy as np

REPEATS = 5


def median_seconds(function) -> float:
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def consistent_votes_by_loop(predictions: np.ndarray, n_classes: int) -> np.ndarray:
    n_parties, partitions, n_examples = predictions.shape
    counts = np.zeros((n_examples, n_classes), dtype=np.int64)
    for example in range(n_examples):
        for party in range(n_parties):
            votes = predictions[party, :, example]
            if (votes == votes[0]).all():
                counts[example, votes[0]] += partitions
    return counts


def voting_row() -> tuple[str, float, float]:
    from workers.algorithms.voting import consistent_vote_counts

    predictions = np.random.default_rng(0).integers(0, 2, size=(50, 2, 6105))
    assert (
        consistent_vote_counts(predictions, 2, 2) == consistent_votes_by_loop(predictions, 2)
    ).all()
    return (
        "consistent voting, 50 parties × 2 students × 6,105 examples",
        median_seconds(lambda: consistent_votes_by_loop(predictions, 2)),
        median_seconds(lambda: consistent_vote_counts(predictions, 2, 2)),
    )


def sandbox_row() -> tuple[str, float, float]:
    from xgboost import XGBClassifier

    from workers.modelio import SandboxLimits, predict_in_sandbox
    from workers.modelio.export import export_xgboost_json

    rng = np.random.default_rng(0)
    features = rng.normal(size=(2000, 20)).astype(np.float32)
    labels = (features[:, 0] + features[:, 1] > 0).astype(int)
    models = [
        export_xgboost_json(
            XGBClassifier(n_estimators=50, max_depth=4, random_state=seed).fit(features, labels)
        )
        for seed in range(8)
    ]
    sample, limits = features[:256], SandboxLimits()
    return (
        "sandbox validation of 8 XGBoost models, 256 rows",
        median_seconds(
            lambda: [
                predict_in_sandbox([model], sample, n_classes=2, limits=limits) for model in models
            ]
        ),
        median_seconds(lambda: predict_in_sandbox(models, sample, n_classes=2, limits=limits)),
    )


def main() -> None:
    print("| what | baseline | Onefold | baseline / Onefold |")
    print("|---|---|---|---|")
    for name, baseline, onefold in (voting_row(), sandbox_row()):
        print(
            f"| {name} | {baseline * 1000:.1f} ms | {onefold * 1000:.1f} ms | {baseline / onefold:.1f}× |"
        )
    print(
        f"\nMedians of {REPEATS} runs. Baselines: a per-example Python loop; one sandbox child per model."
    )


if __name__ == "__main__":
    main()
