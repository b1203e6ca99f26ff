"""Which learner a silo's own model (issue 31) should be by default, chosen on validation rows of the tabular suite.

For every data set of the suite (../shared/data/README.md), 60 % of the rows are dealt to 10 and 20 silos by a
Dirichlet(0.5) label partition (at least 10 rows each) and 20 % are validation rows (the remaining 20 % — the
test rows — are never read here). Each candidate learner is trained on each silo's rows alone, in the feature
view the toolkit would encode them in for it (ordinal for trees, one-hot and standardised for logistic
regression), and scored on the validation rows; the table gives the mean over silos, then over data sets and
seeds, of accuracy and balanced accuracy, and of the best silo's balanced accuracy (what the market's "best
single silo" baseline reads).

    PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/own_model_defaults.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

from workers.data_files import data_dir
from workers.features import encode_features, infer_feature_spec
from workers.learners import fit_aligned
from workers.modelio.families import feature_view_for
from workers.partition import dirichlet_label_partition

SUITE = (
    "twonorm",
    "ring",
    "banana",
    "texture",
    "optdigits",
    "segment",
    "marketing",
    "splice",
    "chess",
    "titanic",
    "page-blocks0",
)
CANDIDATES = {
    "random_forest (100 trees)": {"family": "random_forest", "n_estimators": 100},
    "random_forest (100 trees, depth 12)": {
        "family": "random_forest",
        "n_estimators": 100,
        "max_depth": 12,
    },
    "random_forest (25 trees, depth 6: the student)": {
        "family": "random_forest",
        "n_estimators": 25,
        "max_depth": 6,
    },
    "xgboost (100 rounds, depth 4)": {"family": "xgboost", "n_estimators": 100, "max_depth": 4},
    "logistic_regression": {"family": "logistic_regression"},
}


def suite_table(name: str, folder: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of one suite file with named columns (the class dropped) and its class indices."""
    frame = pd.read_csv(folder / f"{name}.dat", header=None, skipinitialspace=True)
    frame.columns = [f"x{index}" for index in range(frame.shape[1] - 1)] + ["class"]
    labels = pd.factorize(frame["class"].astype(str).str.strip())[0]
    return frame.drop(columns="class"), labels.astype(np.int64)


def scores(
    name: str, folder: Path, *, n_silos: int, seed: int
) -> dict[str, tuple[float, float, float]]:
    """Per candidate: the mean over silos of accuracy and balanced accuracy on the validation rows, and the best
    silo's balanced accuracy. Each candidate reads the federation's encoding in its own view, as the toolkit
    encodes a silo's rows (the specification inferred from the silo rows, as a federation's public data)."""
    frame, labels = suite_table(name, folder)
    silo_rows, rest = train_test_split(
        np.arange(len(labels)), train_size=0.6, stratify=labels, random_state=seed
    )
    validation, _test = train_test_split(
        rest, train_size=0.5, stratify=labels[rest], random_state=seed
    )
    spec = infer_feature_spec(frame.iloc[silo_rows])
    n_classes = int(labels.max()) + 1
    parties = dirichlet_label_partition(labels[silo_rows], n_silos, beta=0.5, seed=seed)
    result = {}
    for candidate, learner in CANDIDATES.items():
        features = encode_features(frame, spec, view=feature_view_for(learner["family"]))
        per_silo = []
        for party in parties:
            rows = silo_rows[party]
            model = fit_aligned(
                learner, features[rows], labels[rows], n_classes=n_classes, seed=seed
            )
            predicted = np.asarray(model.predict(features[validation]))
            per_silo.append(
                (
                    float(np.mean(predicted == labels[validation])),
                    float(balanced_accuracy_score(labels[validation], predicted)),
                )
            )
        per_silo = np.asarray(per_silo)
        result[candidate] = (*per_silo.mean(axis=0), float(per_silo[:, 1].max()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=data_dir() / "keel")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--silos", type=int, nargs="+", default=[10, 20])
    args = parser.parse_args()
    rows = {candidate: [] for candidate in CANDIDATES}
    for name in SUITE:
        for n_silos in args.silos:
            for seed in args.seeds:
                measured = scores(name, args.data, n_silos=n_silos, seed=seed)
                for candidate, values in measured.items():
                    rows[candidate].append(values)
                shown = "; ".join(
                    f"{candidate.split(' (')[0]}{' ' + candidate.split(' (')[1][:-1] if ' (' in candidate else ''}"
                    f" {values[0]:.3f}/{values[1]:.3f}"
                    for candidate, values in measured.items()
                )
                print(f"{name} {n_silos} silos seed {seed}: {shown}", flush=True)
    print(
        "\n| own model | mean silo accuracy | mean silo balanced accuracy | best silo balanced accuracy |"
    )
    print("|---|---|---|---|")
    for candidate, values in rows.items():
        mean = np.mean(values, axis=0)
        print(f"| {candidate} | {mean[0]:.4f} | {mean[1]:.4f} | {mean[2]:.4f} |")


if __name__ == "__main__":
    main()
