"""Rows per second of the platform's predictions against the downloaded raw-column ONNX in onnxruntime, with a
fresh sandbox child per call (before issue 42 item 4) and with warm sandbox sessions (after), in one run.

    DJANGO_SETTINGS_MODULE=market.settings PYTHONPATH=. nice -n 10 .venv/bin/python benchmarks/predict_cost.py \\
        [--rows 10000] [--calls 5] > benchmarks/predict_cost.md

The model is FedKT's default final model (a random forest of 100 trees, depth 8) fitted on 3,000 public rows of the
Adult suite federation (seed 0) in the ordinal view, exported as a job exports it; the rows are ``--rows`` raw Adult
rows as a buyer sends them: ``{"rows": [{column: value, ...}, ...]}``.

- *platform*: what ``POST /api/global-models/<id>/predict/`` does with the body once the buyer is signed in and
  entitled (the access check, the throttle and the audit row are not run: they need the database): ``json.loads``,
  ``prediction_frame`` (the row checks), ``encode_features``, ``stored_ensemble_probabilities`` through the
  predictor the API uses (a fresh sandbox child per call, ``stored_models_predict``'s configuration; or the warm
  pool, ``warm_models_predict``'s), the response dict and ``json.dumps``;
- *onnxruntime*: ``InferenceSession.run`` of the raw-column ONNX (``raw_column_onnx``, what a buyer downloads) on
  the same rows as arrays, one thread, the session made once (its inputs built untimed).

The sides take turns: each of ``--calls`` rounds runs one fresh-child call, one warm call and one onnxruntime run,
so that the ratios of a round compare calls that shared the machine's load; the table gives each side's median
rows/s and the median of the rounds' ratios. The warm pool's first call (which starts its session) is reported
apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

LABEL_COLUMN = "income"


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()


def fitted_model():
    """The default final model's ONNX file, the feature specification and the raw rows to predict."""
    from workers.algorithms.fedkt_fusion import DEFAULT_FINAL_MODEL
    from workers.features import ORDINAL_VIEW
    from workers.learners import AlignedClassifier, make_learner
    from workers.modelio.artifact import ArtifactFormat, exported_file
    from workers.reproduce.suite import Views, federation_build, suite_table

    frame, label_text = suite_table("adult")
    federation = federation_build(frame, label_text, seed=0, test=False)
    views = Views(federation)
    features = views.rows("public", ORDINAL_VIEW)[:3000]
    model = AlignedClassifier(make_learner(DEFAULT_FINAL_MODEL, random_state=0), n_classes=2)
    model.fit(features, views.labels("public")[:3000])
    onnx = exported_file(model.estimator_, ArtifactFormat.ONNX, n_features=features.shape[1]).data
    return onnx, federation.spec, frame, federation.classes


def request_body(frame, rows: int) -> bytes:
    sample = frame.iloc[:rows]
    records = sample.astype(object).where(sample.notna(), None).to_dict(orient="records")
    return json.dumps({"rows": records}).encode()


def platform_call(body: bytes, *, onnx: bytes, spec: dict, classes, predict) -> bytes:
    """The predict API's work on one request body, as :func:`market.commerce.predictions.model_predict` does it."""
    from market.commerce.prediction_rows import prediction_frame
    from workers.algorithms.bundle import stored_ensemble_probabilities
    from workers.features import ORDINAL_VIEW, encode_features

    rows = json.loads(body)["rows"]
    frame = prediction_frame(rows=rows, csv_data=None, spec=spec, label_column=LABEL_COLUMN)
    probabilities = stored_ensemble_probabilities(
        [onnx],
        weights=[1.0],
        views=[ORDINAL_VIEW],
        features=encode_features(frame, spec),
        n_classes=len(classes),
        feature_spec=spec,
        predict=predict,
    )
    labels = list(classes)
    return json.dumps(
        {
            "classes": [labels[index] for index in probabilities.argmax(axis=1)],
            "probabilities": probabilities.round(6).tolist(),
            "class_labels": labels,
        }
    ).encode()


def onnxruntime_call(onnx: bytes, spec: dict, classes, frame, rows: int):
    """A function running the raw-column ONNX on ``rows`` raw rows, and its probabilities."""
    import onnxruntime

    from workers.features import ORDINAL_VIEW
    from workers.modelio.raw_columns import RawColumnMember, raw_column_onnx

    raw = raw_column_onnx(
        [RawColumnMember(onnx, feature_view=ORDINAL_VIEW)], spec=spec, class_labels=list(classes)
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        raw, sess_options=options, providers=["CPUExecutionProvider"]
    )
    sample = frame.iloc[:rows]
    inputs = {}
    for graph_input in session.get_inputs():
        values = sample[graph_input.name]
        if graph_input.type == "tensor(double)":
            inputs[graph_input.name] = values.to_numpy(dtype=np.float64, na_value=np.nan)[:, None]
        else:
            inputs[graph_input.name] = (
                values.astype(object).where(values.notna(), "").astype(str).to_numpy(dtype=object)
            )[:, None]
    return lambda: session.run(["probabilities"], inputs)[0]


def timed(call, calls: int) -> tuple[list[float], object]:
    seconds, result = [], None
    for _ in range(calls):
        started = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - started)
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=5)
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    import django

    django.setup()
    from market.sandbox import prediction_session_pool, stored_models_predict, warm_models_predict

    onnx, spec, frame, classes = fitted_model()
    body = request_body(frame, arguments.rows)
    runtime = onnxruntime_call(onnx, spec, classes, frame, arguments.rows)
    load_before = load()

    def platform(predict):
        return lambda: platform_call(body, onnx=onnx, spec=spec, classes=classes, predict=predict)

    first_seconds, _ = timed(platform(warm_models_predict), 1)
    rounds = []
    for _ in range(arguments.calls):
        fresh_seconds, fresh = timed(platform(stored_models_predict), 1)
        warm_seconds, warm = timed(platform(warm_models_predict), 1)
        runtime_seconds, runtime_probabilities = timed(runtime, 1)
        rounds.append((fresh_seconds[0], warm_seconds[0], runtime_seconds[0]))
    load_after = load()
    prediction_session_pool().close()
    warm_probabilities = np.array(json.loads(warm)["probabilities"])
    assert json.loads(fresh) == json.loads(warm)
    difference = float(np.abs(warm_probabilities - np.asarray(runtime_probabilities)).max())
    columns = dict(zip(("fresh", "warm", "onnxruntime"), zip(*rounds)))
    rates = {name: arguments.rows / statistics.median(seconds) for name, seconds in columns.items()}
    # a round's rows/s ratio is onnxruntime's seconds over the platform's
    ratios = {
        name: statistics.median(round_[2] / round_[index] for round_ in rounds)
        for index, name in enumerate(("fresh", "warm"))
    }
    print("# Predictions: the platform against the downloaded raw-column ONNX (issue 42 item 4)\n")
    print(
        "`DJANGO_SETTINGS_MODULE=market.settings PYTHONPATH=. nice -n 10 .venv/bin/python "
        f"benchmarks/predict_cost.py --rows {arguments.rows} --calls {arguments.calls}`\n"
    )
    print(
        f"Random forest, 100 trees, depth 8; {arguments.rows} raw Adult rows per call; "
        f"{arguments.calls} calls each (median).\n"
    )
    print(f"Load before: `{load_before}`  \nLoad after: `{load_after}`\n")
    print(
        "| side | seconds per call (each round) | rows/s (median) | ÷ onnxruntime (median of rounds) |"
    )
    print("|---|---|---|---|")
    for name, label in (
        ("fresh", "platform, fresh sandbox child per call (before)"),
        ("warm", "platform, warm sandbox session (after)"),
        ("onnxruntime", "raw-column ONNX in onnxruntime"),
    ):
        each = ", ".join(f"{value:.3f}" for value in columns[name])
        ratio = f"{ratios[name]:.2f}" if name in ratios else "1"
        print(f"| {label} | {each} | {rates[name]:,.0f} | {ratio} |")
    print(
        f"\nThe warm pool's first call (starting its session): {first_seconds[0]:.3f} s. "
        f"Platform vs onnxruntime probabilities: max abs difference {difference:.1e} (the platform rounds to 6 "
        "decimals).\n"
    )
    print(
        f"Ratio platform rows/s ÷ onnxruntime rows/s: before **{ratios['fresh']:.2f}**, "
        f"after **{ratios['warm']:.2f}** (target ≥ 0.5)."
    )


if __name__ == "__main__":
    main()
