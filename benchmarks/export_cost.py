"""What exporting the default final model costs against fitting it, before and after issue 42 item 1, in one run.

    PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/export_cost.py [--rows 3000] [--repeats 3] \\
        > benchmarks/export_cost.md

The model is FedKT's default final model (``DEFAULT_FINAL_MODEL``: a random forest of 100 trees, depth 8) fitted as
the engines fit it (``fit_estimator``) on ``--rows`` public rows of the Adult suite federation (seed 0, ordinal
view, the rows' own classes as labels). Each measurement runs in a fresh Python process, as a worker child exports:
the export's imports are part of its cost, the fit's imports are not (the engine has loaded them by then).

- *before*: the old path, ``skl2onnx.to_onnx`` (``export_sklearn_onnx``) and ``import skops.io; skops.io.dumps``;
- *after*: ``exported_files`` as the job calls it (the tree-ensemble writer and the skops writer).

Before and after alternate, ``--repeats`` times each; the table gives every run and the medians of the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def measure(path: str, rows: int) -> dict:
    """In this (fresh) process: fit the default final model, then export it by ``path``; seconds of each."""
    import numpy as np

    from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL
    from workers.features import ORDINAL_VIEW
    from workers.learners import make_learner
    from workers.learners.forest import fit_estimator
    from workers.reproduce.suite import Views, federation_build, suite_table

    frame, label_text = suite_table("adult")
    views = Views(federation_build(frame, label_text, seed=0, test=False))
    features = views.rows("public", ORDINAL_VIEW)[:rows].astype(np.float32)
    labels = views.labels("public")[:rows]
    model = make_learner(DEFAULT_FINAL_MODEL, random_state=0)
    started = time.perf_counter()
    fit_estimator(model, features, labels)
    fit_seconds = time.perf_counter() - started
    timings = (_before if path == "before" else _after)(model, features.shape[1])
    difference = _difference(timings.pop("onnx_bytes"), model, features)
    return {"path": path, "fit": fit_seconds, **timings, "onnx_vs_fitted": difference}


def _before(model, n_features: int) -> dict:
    from workers.modelio.export import export_sklearn_onnx

    started = time.perf_counter()
    onnx = export_sklearn_onnx(model, n_features)
    onnx_seconds = time.perf_counter() - started
    import skops.io

    skops.io.dumps(model)
    return {
        "onnx": onnx_seconds,
        "native": time.perf_counter() - started - onnx_seconds,
        "onnx_bytes": onnx,
    }


def _after(model, n_features: int) -> dict:
    from workers.modelio.artifact import ArtifactFormat, exported_file

    started = time.perf_counter()
    onnx = exported_file(model, ArtifactFormat.ONNX, n_features=n_features).data
    onnx_seconds = time.perf_counter() - started
    exported_file(model, ArtifactFormat.SKOPS, n_features=n_features)
    return {
        "onnx": onnx_seconds,
        "native": time.perf_counter() - started - onnx_seconds,
        "onnx_bytes": onnx,
    }


def _difference(onnx: bytes, model, features) -> float:
    import numpy as np

    from workers.modelio.base import ModelFormat
    from workers.modelio.native import predict_probabilities

    probabilities = predict_probabilities(onnx, ModelFormat.ONNX, features, n_classes=2)
    return float(np.abs(probabilities - model.predict_proba(features)).max())


def fresh(path: str, rows: int) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--measure", path, "--rows", str(rows)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--measure", choices=("before", "after"))
    arguments = parser.parse_args()
    if arguments.measure:
        print(json.dumps(measure(arguments.measure, arguments.rows)))
        return
    load_before = load()
    runs = [
        fresh(path, arguments.rows)
        for _ in range(arguments.repeats)
        for path in ("before", "after")
    ]
    load_after = load()
    print("# Export cost of the default final model (issue 42 item 1)\n")
    print(
        f"`PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/export_cost.py --rows {arguments.rows} "
        f"--repeats {arguments.repeats}`\n"
    )
    print(
        f"Random forest, 100 trees, depth 8, {arguments.rows} Adult public rows; each run a fresh process.\n"
    )
    print(f"Load before: `{load_before}`  \nLoad after: `{load_after}`\n")
    print(
        "| run | path | fit s | ONNX s | skops s | export s | export / fit | ONNX − fitted (max abs) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"before": [], "after": []}
    for index, run in enumerate(runs):
        export = run["onnx"] + run["native"]
        ratios[run["path"]].append(export / run["fit"])
        print(
            f"| {index // 2 + 1} | {run['path']} | {run['fit']:.3f} | {run['onnx']:.3f} | {run['native']:.3f} | "
            f"{export:.3f} | {export / run['fit']:.2f}× | {run['onnx_vs_fitted']:.1e} |"
        )
    before, after = (statistics.median(ratios[path]) for path in ("before", "after"))
    print(
        f"\nMedian export / fit: before **{before:.2f}×**, after **{after:.2f}×** (target ≤ 1.5×); "
        f"the export is {before / after:.1f}× cheaper against the same fit."
    )


if __name__ == "__main__":
    main()
