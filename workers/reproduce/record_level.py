"""Record-level L1 on Adult (issue 40, item 2): GNMax over every student of every silo, semi-private final model.

``python -m workers.reproduce.record_level choose [--seeds 3] [--draws 2]``, ``... choose-final`` and
``... choose-students`` (validation rows, three rounds; the test split is not read) and ``python -m workers.reproduce.record_level test [--seeds 3] [--draws 3]`` (the chosen setting on the
test split, read once); ``python -m workers.reproduce.record_level summary`` prints the tables of
``docs/results/private.md``.

Protocol: the paper's Adult protocol of :mod:`workers.reproduce.defaults` (75 / 12.5 / 12.5 % silos' pool / public /
test; without ``test`` a stratified 15 % of the pool is the validation set and the test split is dropped), 50 silos
by Dirichlet(0.5). From the pool, :data:`OPERATOR_ROWS` stratified rows are first set aside as the federation's
evaluation split (the operator's labelled rows; the silos never see them): the semi-private final model is fitted
on its fit half (:func:`workers.algorithms.auto_fusion.evaluation_halves`), the operator-only model too. Each silo
fits s students, each on its own disjoint part of its rows (:func:`workers.algorithms.fedkt.
disjoint_partition_students`, the product's tree teacher as the learner, ordinal view); the job is the engine's
``fedkt`` at ``"privacy": {"unit": "record"}``: every student votes, GNMax at σ = ratio × the votes (50 × s),
the most queries whose **record-level** (example-level) ε at δ 1e-5 fits :data:`EPSILON` per silo
(:func:`workers.privacy.costs.calibrate_gnmax` with the kind's own price), the L1 default final model (logistic
regression, one-hot view) with the semi-private default (cross-fitted inside the fit half). ε is the engine's
data-independent report. The noise is OpenDP's, unseeded: a seed's score is the mean of its draws; ± is the sd
over seeds. The setting (s, σ ratio) is chosen on validation rows: best mean accuracy, ties within one standard
error broken by balanced accuracy (:func:`workers.reproduce.private.choose_setting`'s rule).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.fedkt import disjoint_partition_students
from workers.algorithms.fedkt_fusion import (
    DEFAULT_FINAL_MODEL,
    DEFAULT_PRIVATE_FINAL_MODEL,
    DEFAULT_SEMI_PRIVATE,
)
from workers.algorithms.operator_baseline import operator_only_baseline
from workers.algorithms.registry import Member, algorithm_get
from workers.algorithms.schema import MIN_TRAINING_ROWS
from workers.features import ONE_HOT_VIEW, ORDINAL_VIEW
from workers.jobs.noise import replayable_noise
from workers.modelio.families import feature_view_for
from workers.partition import dirichlet_label_partition
from workers.privacy.costs import BudgetView, calibrate_gnmax
from workers.privacy.settings import PrivacySettings
from workers.reproduce.defaults import (
    N_PARTIES,
    PRODUCT_DEFAULTS,
    TREE,
    adult_protocol_test,
    adult_without_test,
)

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "record_level_adult.json"
EPSILON, DELTA = 2.56, 1e-5
OPERATOR_ROWS = 2000
PARTITIONS = (4, 8)
NOISE_RATIOS = (0.1, 0.2, 0.35)
#: The final models tried: the L1 default (logistic, one-hot view; the first round's only one) and the product's
#: forest (ordinal view; the second round, at the first round's best σ ratio, 0.35).
FINAL_MODELS = {"logistic": DEFAULT_PRIVATE_FINAL_MODEL, "forest": DEFAULT_FINAL_MODEL}
#: What each silo's students are: the product's tree teacher (the first two rounds) or its 25-tree student forest
#: (the third round, at the second round's best final model, the forest).
STUDENTS = {"tree": TREE, "forest": PRODUCT_DEFAULTS[2]}
SECOND_ROUND = [(s, 0.35, final, "tree") for s in PARTITIONS for final in FINAL_MODELS]
THIRD_ROUND = [(s, 0.35, "forest", "forest") for s in PARTITIONS]


def adult_rows(seed: int, *, test: bool) -> dict:
    """Both views of one seed's rows: the silos' pool less the operator's rows, the operator's rows, the public
    rows and the scored rows (validation, or with ``test`` the test split)."""
    read = adult_protocol_test if test else adult_without_test
    ordinal, one_hot = read(seed, ORDINAL_VIEW), read(seed, ONE_HOT_VIEW)
    pool, operator = train_test_split(
        np.arange(len(ordinal["pool_y"])),
        test_size=OPERATOR_ROWS,
        random_state=seed,
        stratify=ordinal["pool_y"],
    )
    return {
        "pool_x": ordinal["pool_x"][pool],
        "pool_y": ordinal["pool_y"][pool],
        "operator_y": ordinal["pool_y"][operator],
        "scored_y": ordinal["validation_y"],
        "public_x": ordinal["public_x"],
        **{
            view: {
                "operator_x": rows["pool_x"][operator],
                "public_x": rows["public_x"],
                "scored_x": rows["validation_x"],
            }
            for view, rows in ((ORDINAL_VIEW, ordinal), (ONE_HOT_VIEW, one_hot))
        },
    }


def record_votes(
    data: dict, *, partitions: int, student: str, seed: int
) -> tuple[np.ndarray, list[Member]]:
    """The silos' summed record-level votes on the public rows (each student's own vote) and their members."""
    engine = algorithm_get("fedkt")
    params = engine.validate({"partitions": partitions, "privacy": {"unit": "record"}})
    parts = dirichlet_label_partition(
        data["pool_y"], N_PARTIES, beta=0.5, seed=seed, min_size=partitions
    )
    votes, members = 0, []
    for index, part in enumerate(parts):
        students = disjoint_partition_students(
            data["pool_x"][part],
            data["pool_y"][part],
            n_classes=2,
            learner=STUDENTS[student],
            partitions=partitions,
            seed=seed * 1000 + index,
        )
        member = Member(
            key=str(index),
            organisation=str(index),
            n_examples=len(part),
            validation_score=0.0,
            n_models=partitions,
            disjoint_partitions=True,
        )
        probabilities = np.stack([student.predict_proba(data["public_x"]) for student in students])
        votes = votes + engine.member_signal(
            probabilities, member=member, n_classes=2, params=params
        )
        members.append(member)
    return np.asarray(votes), members


def record_privacy(*, partitions: int, noise_ratio: float, n_public: int) -> dict:
    """GNMax's σ and queries for a record-level job whose ε fits :data:`EPSILON` per silo, priced by the kind."""
    engine = algorithm_get("fedkt")
    settings = engine.validate({"partitions": partitions, "privacy": {"unit": "record"}})
    privacy = calibrate_gnmax(
        [BudgetView(epsilon_limit=EPSILON, delta=DELTA, vote_shift=1)],
        total_votes=N_PARTIES * partitions,
        noise_ratio=noise_ratio,
        delta=DELTA,
        price=lambda at, shift: engine.l1_cost(settings, privacy=at, vote_shift=shift),
        min_queries=MIN_TRAINING_ROWS,
        max_queries=n_public,
    )
    if privacy is None:
        raise ValueError("No query fits the budget at this noise ratio.")
    return privacy


def scores(predicted: np.ndarray, labels: np.ndarray) -> dict:
    return {
        "accuracy": float(np.mean(predicted == labels)),
        "balanced_accuracy": float(balanced_accuracy_score(labels, predicted)),
    }


def one_draw(
    data: dict, votes, members, *, partitions: int, noise_ratio: float, final: str, seed: int
) -> dict:
    """One noise draw of the record-level job: its noisy labels alone and, on the same draw (replayed), the
    semi-private model, each scored on the scored rows."""
    engine = algorithm_get("fedkt")
    privacy = record_privacy(
        partitions=partitions, noise_ratio=noise_ratio, n_public=len(data["public_x"])
    )
    rows = data[feature_view_for(FINAL_MODELS[final]["family"])]
    base = {
        "partitions": partitions,
        "final_model": FINAL_MODELS[final],
        "query_count": privacy["n_queries"],
        "privacy": {"delta": DELTA, "unit": "record"},
    }
    drawn: list[np.ndarray] = []
    result: dict = {"sigma": privacy["sigma"]}
    for name, params in (
        ("noisy_labels", base),
        ("semi_private", {**base, "semi_private": DEFAULT_SEMI_PRIVATE}),
    ):
        fusion = engine.fuse(
            votes,
            rows["public_x"],
            members=members,
            n_classes=2,
            params=engine.validate(params),
            noise=replayable_noise(
                PrivacySettings.of(privacy).noise(),
                stored=drawn[0] if drawn else None,
                on_draw=drawn.append,
            ),
            seed=seed,
            evaluation=EvaluationRows(rows["operator_x"], data["operator_y"], np.zeros((0, 0, 2))),
        )
        scored = scores(fusion.model.predict(rows["scored_x"]), data["scored_y"])
        if name == "noisy_labels":
            result["noisy_labels"] = scored
            continue
        report = fusion.privacy.data_independent
        result |= {
            **scored,
            "epsilon": report.epsilon,
            "unit": report.unit,
            "delta": report.delta,
            "n_queries": int(fusion.details["n_queried"]),
            "chosen": fusion.details["semi_private"]["chosen"],
        }
    return result


def operator_only(data: dict, *, seed: int) -> dict:
    """The operator-only forest on the fit half of the operator's rows, scored on the scored rows."""
    labels = data["operator_y"]
    fit_rows = evaluation_halves(labels, seed=seed)[0]
    rows = data[ORDINAL_VIEW]
    features = np.concatenate([rows["operator_x"], rows["scored_x"]])
    result, _ = operator_only_baseline(
        features,
        np.concatenate([labels, data["scored_y"]]),
        fit_rows=fit_rows,
        report_rows=len(labels) + np.arange(len(data["scored_y"])),
        n_classes=2,
        seed=seed,
    )
    return {key: float(result[key]) for key in ("accuracy", "balanced_accuracy")}


def seed_run(seed: int, *, test: bool, draws: int, settings) -> list[dict]:
    """Every (s, σ ratio, final model) setting of one seed: ``draws`` draws each, and the operator-only model."""
    data = adult_rows(seed, test=test)
    baseline = operator_only(data, seed=seed)
    entries = []
    for partitions, student in sorted({(setting[0], setting[3]) for setting in settings}):
        votes, members = record_votes(data, partitions=partitions, student=student, seed=seed)
        for _, noise_ratio, final, _ in [
            setting for setting in settings if (setting[0], setting[3]) == (partitions, student)
        ]:
            started = time.perf_counter()
            runs = [
                one_draw(
                    data,
                    votes,
                    members,
                    partitions=partitions,
                    noise_ratio=noise_ratio,
                    final=final,
                    seed=seed,
                )
                for _ in range(draws)
            ]
            entry = {
                "split": "test" if test else "validation",
                "seed": seed,
                "partitions": partitions,
                "noise_ratio": noise_ratio,
                "final": final,
                "student": student,
                "draws": runs,
                "operator_only": baseline,
                "seconds": time.perf_counter() - started,
            }
            print(
                json.dumps(
                    {
                        key: entry[key]
                        for key in ("seed", "partitions", "noise_ratio", "final", "student")
                    }
                )
                + f" acc {np.mean([run['accuracy'] for run in runs]):.4f}"
                + f" bal {np.mean([run['balanced_accuracy'] for run in runs]):.3f}"
                + f" eps {runs[0]['epsilon']:.3f} q {runs[0]['n_queries']}"
                + f" operator {baseline['accuracy']:.4f}",
                flush=True,
            )
            entries.append(entry)
    return entries


def setting_of(entry: dict) -> tuple:
    """(s, σ ratio, final model, students) of an entry; the first round's entries name no final model (logistic)
    and the first two no students (trees)."""
    return (
        entry["partitions"],
        entry["noise_ratio"],
        entry.get("final", "logistic"),
        entry.get("student", "tree"),
    )


def setting_means(entries: list[dict], key: str) -> dict[tuple, list[float]]:
    """Per setting, each seed's mean over its draws of ``key`` (a path "noisy_labels.accuracy" reads one level
    down)."""
    means: dict[tuple, list[float]] = {}
    for entry in entries:
        values = [run for run in entry["draws"]]
        for part in key.split("."):
            values = [value.get(part, {}) if isinstance(value, dict) else value for value in values]
        if not all(isinstance(value, float) for value in values):
            continue  # the first round did not score the noisy labels alone
        means.setdefault(setting_of(entry), []).append(float(np.mean(values)))
    return means


def chosen_setting(entries: list[dict]) -> tuple:
    """Best mean validation accuracy; settings within one standard error tie, the best balanced accuracy wins."""
    accuracy, balanced = (
        setting_means(entries, "accuracy"),
        setting_means(entries, "balanced_accuracy"),
    )
    best = max(accuracy, key=lambda setting: np.mean(accuracy[setting]))
    values = accuracy[best]
    error = float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0
    tied = [s for s in accuracy if np.mean(accuracy[s]) >= np.mean(values) - error]
    return max(tied, key=lambda setting: np.mean(balanced[setting]))


def _mean_sd(values) -> str:
    return f"{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f}" if len(values) else "—"


def summary(entries: list[dict]) -> str:
    """The markdown table of ``docs/results/private.md``: per split and setting, the semi-private model, the
    noisy labels alone and the operator-only model."""
    lines = [
        "| split | s | σ / votes | final model | students | queries | ε (example-level, δ 1e-5) | seeds × draws | "
        "semi-private | balanced | noisy labels alone | operator-only | balanced | margin over operator-only "
        "(points) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for split in ("validation", "test"):
        chosen = [entry for entry in entries if entry["split"] == split]
        accuracy = setting_means(chosen, "accuracy")
        balanced = setting_means(chosen, "balanced_accuracy")
        noisy = setting_means(chosen, "noisy_labels.accuracy")
        for setting in sorted(accuracy):
            rows = [entry for entry in chosen if setting_of(entry) == setting]
            operator = [entry["operator_only"]["accuracy"] for entry in rows]
            operator_balanced = [entry["operator_only"]["balanced_accuracy"] for entry in rows]
            margin = 100 * (np.asarray(accuracy[setting]) - np.asarray(operator))
            epsilon = max(run["epsilon"] for entry in rows for run in entry["draws"])
            lines.append(
                f"| {split} | {setting[0]} | {setting[1]} | {setting[2]} | {setting[3]} | "
                f"{rows[0]['draws'][0]['n_queries']} | {epsilon:.2f} | {len(rows)} × {len(rows[0]['draws'])} | "
                f"{_mean_sd(accuracy[setting])} | {np.mean(balanced[setting]):.3f} | "
                f"{_mean_sd(noisy.get(setting, []))} | {_mean_sd(operator)} | "
                f"{np.mean(operator_balanced):.3f} | {margin.mean():+.2f} ± {margin.std():.2f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.record_level")
    parser.add_argument(
        "command", choices=("choose", "choose-final", "choose-students", "test", "summary")
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=2)
    arguments = parser.parse_args(argv)
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if arguments.command == "summary":
        print(summary(stored))
        return 0
    test = arguments.command == "test"
    if test:
        validation = [entry for entry in stored if entry["split"] == "validation"]
        settings = [chosen_setting(validation)]
    elif arguments.command == "choose-final":
        settings = SECOND_ROUND
    elif arguments.command == "choose-students":
        settings = THIRD_ROUND
    else:
        settings = [(s, ratio, "logistic", "tree") for s in PARTITIONS for ratio in NOISE_RATIOS]
    entries = [
        entry
        for seed in range(arguments.seeds)
        for entry in seed_run(seed, test=test, draws=arguments.draws, settings=settings)
    ]
    split = "test" if test else "validation"
    replaced = {(entry["seed"], *setting_of(entry)) for entry in entries}
    kept = [
        entry
        for entry in stored
        if entry["split"] != split or (entry["seed"], *setting_of(entry)) not in replaced
    ]
    RESULTS.write_text(json.dumps(kept + entries, indent=1) + "\n")
    print(summary(kept + entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
