"""What exporting the default final model costs against fitting it, before and after issue 42 item 1, in one run.

    PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/export_cost.py [--rows 3000] [--repeats 3] \\
        > benchmarks/export_cost.md

The model is FedKT's default final model (``DEFAULT_FINAL_MODEL``: a random forest of 100 trees, depth 8) fitted as
the engines fit it (an ``AlignedClassifier``, which fits through ``fit_estimator``) on ``--rows`` public rows of the Adult suite federation (seed 0, ordinal
view, the rows' own classes as labels). Each measurement runs in a fresh Python process, as a worker child exports:
the export's imports are part of its cost, the fit's imports are not (the engine has loaded them by then).

- *before*: the old path, ``skl2onnx.to_onnx`` (``export_sklearn_onnx``) and ``import skops.io; skops.io.dumps``,
  one after the other;
- *after, serial*: the new writers one after the other (``exported_file``: the tree-ensemble ONNX writer, the skops
  writer);
- *after*: as the job runs it (``export_global_model_while``): the ONNX file, then its evaluation in the sandbox
  while the skops file is written in a thread. The export's cost on the job's path is the call's time less the
  evaluation's own (the "skops s" column is then the part of the call after the ONNX file that the evaluation
  did not cover).

The paths alternate, ``--repeats`` times each; the table gives every run and the medians of the ratios.
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
    from workers.learners import AlignedClassifier, make_learner
    from workers.reproduce.suite import Views, federation_build, suite_table

    frame, label_text = suite_table("adult")
    views = Views(federation_build(frame, label_text, seed=0, test=False))
    features = views.rows("public", ORDINAL_VIEW)[:rows].astype(np.float32)
    labels = views.labels("public")[:rows]
    model = AlignedClassifier(make_learner(DEFAULT_FINAL_MODEL, random_state=0), n_classes=2)
    started = time.perf_counter()
    model.fit(features, labels)
    fit_seconds = time.perf_counter() - started
    timings = PATHS[path](model, features)
    difference = _difference(timings.pop("onnx_bytes"), model, features)
    return {"path": path, "fit": fit_seconds, **timings, "onnx_vs_fitted": difference}


def _before(model, features) -> dict:
    from workers.modelio.export import export_sklearn_onnx

    started = time.perf_counter()
    onnx = export_sklearn_onnx(model.estimator_, features.shape[1])
    onnx_seconds = time.perf_counter() - started
    import skops.io

    skops.io.dumps(model.estimator_)
    return {
        "onnx": onnx_seconds,
        "native": time.perf_counter() - started - onnx_seconds,
        "onnx_bytes": onnx,
    }


def _after_serial(model, features) -> dict:
    from workers.modelio.artifact import ArtifactFormat, exported_file

    started = time.perf_counter()
    onnx = exported_file(model.estimator_, ArtifactFormat.ONNX, n_features=features.shape[1]).data
    onnx_seconds = time.perf_counter() - started
    exported_file(model.estimator_, ArtifactFormat.SKOPS, n_features=features.shape[1])
    return {
        "onnx": onnx_seconds,
        "native": time.perf_counter() - started - onnx_seconds,
        "onnx_bytes": onnx,
    }


def _after(model, features) -> dict:
    from workers.jobs.export import export_global_model_while
    from workers.modelio import SandboxConfiguration

    moments: dict[str, float] = {}

    def evaluate(portable):
        moments["evaluation_started"] = time.perf_counter()
        outcome = SandboxConfiguration().predict([portable.data], features, n_classes=2)[0]
        moments["evaluation_ended"] = time.perf_counter()
        return outcome

    started = time.perf_counter()
    files, _ = export_global_model_while(
        model, n_features=features.shape[1], n_classes=2, evaluate=evaluate
    )
    ended = time.perf_counter()
    evaluation = moments["evaluation_ended"] - moments["evaluation_started"]
    onnx_seconds = moments["evaluation_started"] - started
    return {
        "onnx": onnx_seconds,
        "native": max(0.0, ended - started - evaluation - onnx_seconds),
        "evaluation": evaluation,
        "onnx_bytes": files[1].data,
    }


PATHS = {"before": _before, "after, serial": _after_serial, "after": _after}


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
    parser.add_argument("--measure", choices=tuple(PATHS))
    arguments = parser.parse_args()
    if arguments.measure:
        print(json.dumps(measure(arguments.measure, arguments.rows)))
        return
    load_before = load()
    runs = [fresh(path, arguments.rows) for _ in range(arguments.repeats) for path in PATHS]
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
        "| run | path | fit s | ONNX s | skops s | export s | export / fit | evaluation s (beside) "
        "| ONNX − fitted (max abs) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {path: [] for path in PATHS}
    for index, run in enumerate(runs):
        export = run["onnx"] + run["native"]
        ratios[run["path"]].append(export / run["fit"])
        evaluation = f"{run['evaluation']:.3f}" if "evaluation" in run else "–"
        print(
            f"| {index // len(PATHS) + 1} | {run['path']} | {run['fit']:.3f} | {run['onnx']:.3f} | "
            f"{run['native']:.3f} | {export:.3f} | {export / run['fit']:.2f}× | {evaluation} | "
            f"{run['onnx_vs_fitted']:.1e} |"
        )
    medians = {path: statistics.median(values) for path, values in ratios.items()}
    print(
        "\nMedian export / fit: "
        + ", ".join(f"{path} **{median:.2f}×**" for path, median in medians.items())
        + f" (target ≤ 1.5×); on the job's path the export is {medians['before'] / medians['after']:.1f}× "
        "cheaper against the same fit."
    )


if __name__ == "__main__":
    main()
