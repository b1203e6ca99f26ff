"""Semi-private students against the operator-only model (issue 40, item 1), on the tabular suite.

``python -m workers.reproduce.semi_private --test [--datasets a,b] [--silos 10] [--seeds 3] [--draws 3]``
``python -m workers.reproduce.semi_private --summary``  (the markdown table of ``docs/results/private.md``)

Protocol: the suite's (:mod:`workers.reproduce.suite`: 60 / 20 / 10 / 10 % silo / public / evaluation / test rows,
silos dealt by Dirichlet(0.5), every silo trained by the toolkit with its defaults). Per data set, silo count and
seed, three models are scored on the same rows (with ``--test`` the test split, read once; without it the held-out
silo rows, and the test split is not read):

- ``operator_only``: :func:`workers.algorithms.operator_baseline.operator_only_baseline`'s forest fitted on the fit
  half of the evaluation split (:func:`workers.algorithms.auto_fusion.evaluation_halves` of the seed), what the
  operator has without any silo;
- ``noisy_labels``: the market's default L1 FedKT job before issue 40 (GNMax at σ =
  :data:`workers.privacy.settings.DEFAULT_GNMAX_NOISE_RATIO` × the votes, the queries a budget of ε allows each
  silo, :data:`workers.algorithms.fedkt_fusion.DEFAULT_PRIVATE_FINAL_MODEL`), through the engine's ``fuse``;
- ``semi_private``: the same job with the default ``semi_private`` (cross-fitted inside the fit half), fused on
  **the same noise draw** (replayed: :func:`workers.jobs.noise.replayable_noise`), so the two differ only in the
  operator's rows.

ε is the honest data-independent party-level bound of the engine's privacy report (δ 1e-5), the same for both
private models. No setting is chosen here: the mix is chosen by the engine's cross-fitting inside the fit half,
and the report half of the evaluation split and the scored rows are read by no fit. The noise is OpenDP's and is
not seeded: every seed runs ``--draws`` draws; a seed's score is the mean of its draws.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.fedkt_fusion import DEFAULT_PRIVATE_FINAL_MODEL, DEFAULT_SEMI_PRIVATE
from workers.algorithms.operator_baseline import OPERATOR_ONLY_VIEW, operator_only_baseline
from workers.algorithms.registry import algorithm_get
from workers.algorithms.schema import MIN_TRAINING_ROWS, fitted_feature_view
from workers.jobs.noise import replayable_noise
from workers.privacy.costs import BudgetView, calibrate_gnmax, fedkt_price
from workers.privacy.settings import DEFAULT_GNMAX_NOISE_RATIO, PrivacySettings
from workers.reproduce.suite import (
    SUITE,
    Views,
    federation_build,
    scores,
    silos_train,
    suite_table,
    uploads_predict,
)

RESULTS_DIR = Path(__file__).resolve().parents[2] / "docs" / "results"
RESULTS = {
    "validation": RESULTS_DIR / "semi_private_validation.json",
    "test": RESULTS_DIR / "semi_private_test.json",
}
DATASETS = ("adult", "magic", "twonorm", "banana", "page-blocks0", "marketing", "optdigits")
EPSILONS = (1.0, 2.56)
DELTA, PARTITIONS, TEACHERS = 1e-5, 2, 5
MODELS = ("operator_only", "noisy_labels", "semi_private")


def l1_privacy(epsilon: float, *, n_members: int, n_public: int) -> dict:
    """The market's default GNMax calibration for ``n_members`` silos of one submission each and ``epsilon`` left
    each (:func:`workers.privacy.costs.calibrate_gnmax`, as ``market.jobs.parameters`` calls it)."""
    privacy = calibrate_gnmax(
        [BudgetView(epsilon_limit=epsilon, delta=DELTA, vote_shift=PARTITIONS)],
        total_votes=n_members * PARTITIONS,
        noise_ratio=DEFAULT_GNMAX_NOISE_RATIO,
        delta=DELTA,
        price=fedkt_price(partitions=PARTITIONS, teachers=TEACHERS),
        min_queries=MIN_TRAINING_ROWS,
        max_queries=n_public,
    )
    if privacy is None:
        raise ValueError(f"No query fits a budget of ε {epsilon}.")
    return privacy


def private_pair(uploads, views: Views, *, epsilon: float, n_classes: int, seed: int) -> dict:
    """The noisy-labels and the semi-private model of one noise draw (the second replays the first's noise)."""
    engine = algorithm_get("fedkt")
    members = [upload.silo.member for upload in uploads]
    privacy = l1_privacy(epsilon, n_members=len(members), n_public=len(views.federation.public))
    base = {
        "final_model": DEFAULT_PRIVATE_FINAL_MODEL,
        "query_count": privacy["n_queries"],
        "privacy": {"delta": DELTA},
    }
    settings = engine.validate(base)
    signal = sum(
        engine.member_signal(upload.public, member=member, n_classes=n_classes, params=settings)
        for upload, member in zip(uploads, members)
    )
    view = fitted_feature_view(settings)
    evaluation = EvaluationRows(
        views.rows("evaluation", view),
        views.labels("evaluation"),
        np.stack([upload.evaluation for upload in uploads]),
    )
    drawn: list[np.ndarray] = []
    results = {}
    for name, params in (
        ("noisy_labels", base),
        ("semi_private", {**base, "semi_private": DEFAULT_SEMI_PRIVATE}),
    ):
        noise = replayable_noise(
            PrivacySettings.of(privacy).noise(),
            stored=drawn[0] if drawn else None,
            on_draw=drawn.append,
        )
        fusion = engine.fuse(
            signal,
            views.rows("public", view),
            members=members,
            n_classes=n_classes,
            params=engine.validate(params),
            noise=noise,
            seed=seed,
            evaluation=evaluation,
        )
        results[name] = {
            **scores(fusion.model.predict(views.rows("scored", view)), views.labels("scored")),
            "epsilon": fusion.privacy.data_independent.epsilon,
            "n_queries": int(fusion.details["n_queried"]),
            **(
                {"chosen": fusion.details["semi_private"]["chosen"]}
                if name == "semi_private"
                else {}
            ),
        }
    return results


def operator_only(views: Views, *, n_classes: int, seed: int) -> dict:
    """The operator-only forest on the fit half of the evaluation split, scored on the scored rows."""
    labels = views.labels("evaluation")
    fit_rows = evaluation_halves(labels, seed=seed)[0]
    scored = views.labels("scored")
    features = np.concatenate(
        [views.rows("evaluation", OPERATOR_ONLY_VIEW), views.rows("scored", OPERATOR_ONLY_VIEW)]
    )
    result = operator_only_baseline(
        features,
        np.concatenate([labels, scored]),
        fit_rows=fit_rows,
        report_rows=len(labels) + np.arange(len(scored)),
        n_classes=n_classes,
        seed=seed,
    )
    return {key: result[key] for key in ("accuracy", "balanced_accuracy", "fit_rows")}


def setting_run(name: str, n_silos: int, seed: int, *, test: bool, draws: int) -> dict:
    """One data set, silo count and seed: the operator-only model and, per ε, ``draws`` pairs of private models."""
    started = time.perf_counter()
    frame, label_text = suite_table(name)
    federation = federation_build(frame, label_text, seed=seed, test=test)
    views = Views(federation)
    uploads = uploads_predict(
        silos_train(federation, n_silos, seed=seed), views, federation.n_classes
    )
    private = {
        str(epsilon): [
            private_pair(uploads, views, epsilon=epsilon, n_classes=federation.n_classes, seed=seed)
            for _ in range(draws)
        ]
        for epsilon in EPSILONS
    }
    return {
        "dataset": name,
        "silos": n_silos,
        "seed": seed,
        "scored_on": federation.scored_on,
        "members": len(uploads),
        "majority": scores(
            np.full(
                len(federation.scored),
                np.bincount(federation.labels[federation.silo_rows]).argmax(),
            ),
            views.labels("scored"),
        ),
        "operator_only": operator_only(views, n_classes=federation.n_classes, seed=seed),
        "private": private,
        "wall_seconds": time.perf_counter() - started,
    }


def _key(run: Mapping) -> tuple:
    return list(SUITE).index(run["dataset"]), run["silos"], run["seed"]


def save(entries: Sequence[dict], path: Path) -> None:
    """Merge ``entries`` into the results at ``path``, replacing earlier runs of the same setting."""
    runs = json.loads(path.read_text()) if path.exists() else []
    done = {_key(entry) for entry in entries}
    runs = [run for run in runs if _key(run) not in done] + list(entries)
    path.write_text(json.dumps(sorted(runs, key=_key), indent=1))


def seed_scores(run: Mapping, model: str, epsilon: str, metric: str = "accuracy") -> float:
    """A seed's score of ``model`` at ``epsilon``: the operator-only model's, or the mean over the draws."""
    if model == "operator_only":
        return float(run["operator_only"][metric])
    return float(np.mean([draw[model][metric] for draw in run["private"][epsilon]]))


def summary(path: Path = RESULTS["test"]) -> str:
    """The markdown table: per setting (data set, silos, ε) each model's mean ± sd over seeds (%), and the semi-private
    model's margin over the operator-only model, mean ± sd of the paired per-seed differences (points)."""
    runs = json.loads(path.read_text())
    settings = sorted(
        {(run["dataset"], run["silos"]) for run in runs},
        key=lambda s: (list(SUITE).index(s[0]), s[1]),
    )
    lines = [
        "| data set | silos | ε (party-level, δ 1e-5) | seeds | operator-only | noisy labels (L1 default before) | "
        "semi-private (L1 default) | margin over operator-only (points) | beats it by more than its sd | chosen |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    margins, beats = [], []
    for dataset, silos in settings:
        chosen = [run for run in runs if (run["dataset"], run["silos"]) == (dataset, silos)]
        for epsilon in map(str, EPSILONS):
            cells = {
                model: 100 * np.array([seed_scores(run, model, epsilon) for run in chosen])
                for model in MODELS
            }
            margin = cells["semi_private"] - cells["operator_only"]
            spread = float(margin.std(ddof=1)) if len(margin) > 1 else float("nan")
            beat = bool(margin.mean() > spread)
            margins.append(float(margin.mean()))
            beats.append(beat)
            epsilons = [
                draw["semi_private"]["epsilon"]
                for run in chosen
                for draw in run["private"][epsilon]
            ]
            picks: dict[str, int] = {}
            for run in chosen:
                for draw in run["private"][epsilon]:
                    picks[draw["semi_private"]["chosen"]] = (
                        picks.get(draw["semi_private"]["chosen"], 0) + 1
                    )
            lines.append(
                f"| {dataset} | {silos} | {max(epsilons):.2f} | {len(chosen)} × {len(chosen[0]['private'][epsilon])} | "
                + " | ".join(
                    f"{cells[model].mean():.2f} ± {cells[model].std(ddof=1):.2f}"
                    for model in MODELS
                )
                + f" | {margin.mean():+.2f} ± {spread:.2f} | {'yes' if beat else 'no'} | "
                + ", ".join(f"{name} {count}" for name, count in sorted(picks.items()))
                + " |"
            )
    lines.append("")
    lines.append(
        f"Semi-private beats the operator-only model by more than the sd of its margin in {sum(beats)} of "
        f"{len(beats)} settings; mean margin {np.mean(margins):+.2f} points."
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.semi_private")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--silos", default="10", help="silo counts, comma-separated")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=3, help="noise draws per seed and ε")
    parser.add_argument("--test", action="store_true", help="score on the test split (once)")
    parser.add_argument("--summary", action="store_true", help="print the markdown table and stop")
    arguments = parser.parse_args(argv)
    path = RESULTS["test" if arguments.test else "validation"]
    if arguments.summary:
        print(summary(path))
        return 0
    names = arguments.datasets.split(",")
    for name in names:
        if name not in SUITE:
            parser.error(f"unknown data set {name!r}; choose among {', '.join(SUITE)}")
    with threadpool_limits(limits=1):  # one BLAS thread: many small logistic fits (as the suite)
        for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
            for name in names:
                for n_silos in (int(count) for count in arguments.silos.split(",")):
                    entry = setting_run(
                        name, n_silos, seed, test=arguments.test, draws=arguments.draws
                    )
                    save([entry], path)
                    print(
                        json.dumps(
                            {
                                key: entry[key]
                                for key in ("dataset", "silos", "seed", "wall_seconds")
                            }
                        ),
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
