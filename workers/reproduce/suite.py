"""The tabular benchmark suite (issue 31, item 5): every job kind against what a silo could do alone.

``python -m workers.reproduce.suite [--datasets a,b] [--silos 10,20] [--seeds 3] [--first-seed 0]``  (validation)
``python -m workers.reproduce.suite --test [--datasets a,b] [--silos 10,20] [--seeds 3]``  (the test split, once)
``python -m workers.reproduce.suite --summary``  (writes ``docs/results/suite.md`` from the saved results)

Data: the suite of ``../shared/data/README.md`` (:data:`SUITE`: eleven KEEL sets plus Adult, MAGIC, Letter and
Pen-digits). Protocol, per data set and seed: a stratified split into silo rows (60 %), public rows whose labels
are dropped (20 %), the federation's evaluation split (10 %) and the test split (10 %)
(:func:`suite_split`); the feature specification is inferred on the public rows, as a federation does; the silo
rows are dealt to 10 and 20 silos by a Dirichlet(0.5) label partition with at least 10 rows each
(:func:`workers.partition.dirichlet_label_partition`).

Every silo trains as ``onefold train`` does, through the toolkit's own function with its defaults
(:func:`workers.silo.training.silo_train`) and uploads what it returns (its students, and its own model
when the toolkit trains one); a silo the toolkit refuses uploads nothing and is counted. What a silo could do
alone, the silo baselines, is its own model refitted by the harness on *all* its rows (:data:`OWN_MODEL`; the
toolkit holds a fifth of them out to score what it uploads). Every candidate of :data:`CANDIDATES`
then runs through the market's engine as a job does (``workers/runner/fusing.py``): ``validate``,
``select``, ``member_signal`` per member, the sum, ``fuse`` (with the evaluation split when the kind reads it).

Baselines: the majority class of the pooled silo rows; the average silo and the best silo (their own models;
the best is the one with the best accuracy on the evaluation split); centralised training, a random forest on
all silo rows pooled (MAGIC also XGBoost, the FedKT paper's reference); and what the operator has without the
silos (issue 39, :mod:`workers.reproduce.suite_operator`): the operator-only model every job records (the market's
default forest on the fit half of the evaluation split), its learning curve over 100 / 250 / 500 / 1,000
operator rows, and the L0 default (:data:`DEFAULT_CANDIDATE`) minus the operator-only model and the best silo on
the scored rows with a paired-bootstrap 95 % interval (``default_versus``). Accuracy and balanced accuracy.

Which rows are scored: with ``--test`` the test split, which nothing else reads. Without it (choosing defaults)
the test split is never read: a stratified sixth of the silo rows (10 % of the data set, the test split's
size) is held out before the partition and plays its role, and the silos share the other five sixths. Either
way each candidate's ``job_evaluation`` is what its job would report on the evaluation split: on the report
half when the fusion chose on the other half (``auto``), on all of it otherwise. Results go to
``docs/results/suite_validation.json`` or ``suite_test.json``, one entry per data set, silo count and seed,
replaced on a rerun; :mod:`workers.reproduce.suite_report` writes ``docs/results/suite.md`` from them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

import workers.algorithms  # noqa: F401  (registers the engines)
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves, fitted_on_evaluation
from workers.algorithms.ensemble import average_probabilities, stacked_probabilities
from workers.algorithms.registry import Member, algorithm_get, member_probabilities_split
from workers.algorithms.schema import fitted_feature_view
from workers.datasets import data_dir
from workers.features import ONE_HOT_VIEW, encode_features, infer_feature_spec
from workers.learners import fit_aligned
from workers.partition import dirichlet_label_partition
from workers.reproduce.suite_operator import (
    default_comparisons,
    operator_learning_curve,
    operator_only_predictions,
)
from workers.reproduce.suite_settings import (
    CANDIDATES,
    CENTRAL_XGBOOST,
    DEFAULT_CANDIDATE,
    LABEL,
    OWN_MODEL,
    RESULTS,
    SHARES,
    SILO_COUNTS,
    SUITE,
)
from workers.silo.errors import DataError
from workers.silo.table import encode_silo_table
from workers.silo.training import TrainingSettings, silo_train


def suite_table(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """The data set's feature columns and its class of each row (as text)."""
    path = data_dir() / SUITE[name]
    if name == "adult":
        frame = pd.read_parquet(path)
        return frame, frame.pop("income").str.strip().str.rstrip(".")
    frame = pd.read_csv(path, header=None, skipinitialspace=True)
    frame.columns = [f"f{index}" for index in range(frame.shape[1] - 1)] + [LABEL]
    return frame, frame.pop(LABEL).astype(str).str.strip()


@dataclass(frozen=True)
class SuiteSplit:
    """Row indices of one seed's split (:func:`suite_split`), each sorted."""

    silo: np.ndarray
    public: np.ndarray
    evaluation: np.ndarray
    test: np.ndarray


def suite_split(labels, seed: int) -> SuiteSplit:
    """A seeded split stratified by class into silo / public / evaluation / test rows (60 / 20 / 10 / 10 %)."""
    labels = np.asarray(labels)
    rows = np.arange(len(labels))
    silo, rest = train_test_split(
        rows, train_size=SHARES["silo"], random_state=seed, stratify=labels
    )
    public, held = train_test_split(rest, train_size=0.5, random_state=seed, stratify=labels[rest])
    evaluation, test = train_test_split(
        held, train_size=0.5, random_state=seed, stratify=labels[held]
    )
    return SuiteSplit(*(np.sort(part) for part in (silo, public, evaluation, test)))


@dataclass(frozen=True)
class Federation:
    """One seed's federation: what the market holds (public rows, evaluation split) and what the silos hold.

    ``scored`` are the rows the report scores (the test split, or in validation mode the held-out silo rows)."""

    frame: pd.DataFrame
    labels: np.ndarray  # class indices of every row
    classes: tuple[str, ...]
    spec: dict
    silo_rows: np.ndarray
    public: np.ndarray
    evaluation: np.ndarray
    scored: np.ndarray
    scored_on: str

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def features(self, rows: np.ndarray, view: str) -> np.ndarray:
        return encode_features(self.frame.iloc[rows], self.spec, view=view)


def federation_build(
    frame: pd.DataFrame, label_text: pd.Series, *, seed: int, test: bool
) -> Federation:
    """The split of one seed; without ``test`` nothing below reads a row of the test split (only the split itself
    sees every row's class, to stratify)."""
    classes = tuple(sorted(label_text.unique()))
    labels = np.searchsorted(classes, label_text.to_numpy()).astype(np.int64)
    split = suite_split(labels, seed)
    silo_rows, scored, scored_on = split.silo, split.test, "test split"
    if not test:
        silo_rows, scored = (
            np.sort(part)
            for part in train_test_split(
                split.silo, test_size=1 / 6, random_state=seed, stratify=labels[split.silo]
            )
        )
        scored_on = "held-out silo rows (a sixth of them; the test split is not read)"
    return Federation(
        frame=frame,
        labels=labels,
        classes=classes,
        spec=infer_feature_spec(frame.iloc[split.public]),
        silo_rows=silo_rows,
        public=split.public,
        evaluation=split.evaluation,
        scored=scored,
        scored_on=scored_on,
    )


@dataclass(frozen=True)
class Silo:
    """One silo after training: what it uploaded (``models``, ``member``; none when the toolkit refused it, with the
    toolkit's sentence in ``refusal``; ``uploaded_own_model``: whether its own model is among them, last) and its
    own model refitted on all its rows (``own_model``, the silo baselines')."""

    index: int
    rows: np.ndarray
    models: tuple
    member: Member | None
    refusal: str | None
    own_model: object
    uploaded_own_model: bool


def silos_train(federation: Federation, n_silos: int, *, seed: int) -> list[Silo]:
    """Deal the silo rows by Dirichlet(0.5) and train every silo as ``onefold train`` does, with its defaults."""
    parts = dirichlet_label_partition(
        federation.labels[federation.silo_rows], n_silos, beta=0.5, seed=seed, min_size=10
    )
    public = federation.features(federation.public, ONE_HOT_VIEW)  # what ``onefold pull`` downloads
    return [
        _silo_train(federation, index, federation.silo_rows[part], public, seed=seed)
        for index, part in enumerate(parts)
    ]


def _silo_train(
    federation: Federation, index: int, rows: np.ndarray, public: np.ndarray, *, seed: int
) -> Silo:
    settings = TrainingSettings(seed=seed)
    table = federation.frame.iloc[rows].assign(
        **{LABEL: np.asarray(federation.classes)[federation.labels[rows]]}
    )
    encoding = {"label_column": LABEL, "class_labels": list(federation.classes)}
    try:
        result, data = silo_train(table, federation.spec, public, settings=settings, **encoding)
    except DataError as error:
        result, refusal = None, str(error)
        data = encode_silo_table(table, federation.spec, view=settings.feature_view(), **encoding)
    else:
        refusal = None
    return Silo(
        index=index,
        rows=rows,
        models=() if result is None else tuple(result.models),
        member=None if result is None else _member(index, result.models, result.metadata),
        refusal=refusal,
        own_model=fit_aligned(
            OWN_MODEL, data.features, data.labels, n_classes=federation.n_classes, seed=seed
        ),
        uploaded_own_model=result is not None and bool(result.metadata.get("own_model")),
    )


def _member(index: int, models: Sequence, metadata: Mapping) -> Member:
    """The silo's upload as the engines see it (what ``job_members`` reads of a submission)."""
    return Member(
        key=str(index),
        organisation=str(index),
        n_examples=int(metadata["n_local_examples"]),
        validation_score=float(metadata["local_validation_score"]),
        n_models=len(models),
        label_distribution=tuple(metadata["label_distribution"]),
        teachers=metadata.get("teachers"),
        # the toolkit's own model, uploaded last beside the students, once it trains one (issue 31 item 2)
        **({"own_model": True} if metadata.get("own_model") else {}),
    )


class Views:
    """The federation's rows in each feature view, encoded once: ``views.rows("public", "ordinal")``."""

    def __init__(self, federation: Federation):
        self.federation = federation
        self._encoded: dict[tuple[str, str], np.ndarray] = {}

    def rows(self, part: str, view: str) -> np.ndarray:
        if (part, view) not in self._encoded:
            self._encoded[part, view] = self.federation.features(
                getattr(self.federation, part), view
            )
        return self._encoded[part, view]

    def labels(self, part: str) -> np.ndarray:
        return self.federation.labels[getattr(self.federation, part)]


def scores(predicted, truth) -> dict:
    """Accuracy and balanced accuracy of predicted classes."""
    predicted, truth = np.asarray(predicted), np.asarray(truth)
    return {
        "accuracy": float(np.mean(predicted == truth)),
        "balanced_accuracy": float(balanced_accuracy_score(truth, predicted)),
    }


def job_report_rows(fusion, labels, *, seed: int) -> np.ndarray:
    """The evaluation rows a job reports on: the half an ``auto`` choice did not read, else all of them (as
    ``workers.runner.fusing.evaluation_report_rows``)."""
    if fitted_on_evaluation(fusion.details):
        return evaluation_halves(labels, seed=seed)[1]
    return np.arange(len(labels))


@dataclass(frozen=True)
class Upload:
    """A silo's uploaded models' probabilities as the job's chunks compute them, in the silo's view: per model of
    the public rows ``(n_models, n_public, K)``, averaged over its models of the evaluation and scored rows."""

    silo: Silo
    public: np.ndarray
    evaluation: np.ndarray
    scored: np.ndarray


def uploads_predict(silos: Sequence[Silo], views: Views, n_classes: int) -> list[Upload]:
    """Every uploaded silo's probabilities (silos the toolkit refused uploaded nothing)."""
    view = TrainingSettings().feature_view()
    return [
        Upload(
            silo,
            stacked_probabilities(silo.models, views.rows("public", view), n_classes),
            *(
                member_best(
                    stacked_probabilities(silo.models, views.rows(part, view), n_classes),
                    silo.member,
                )
                for part in ("evaluation", "scored")
            ),
        )
        for silo in silos
        if silo.member is not None
    ]


def member_best(probabilities: np.ndarray, member: Member) -> np.ndarray:
    """A member's probabilities ``(n_rows, K)`` from its models' ``(n_models, n_rows, K)``, as the job's chunks
    keep them for the evaluation split and an ensemble bundle predicts: its own model's when it uploaded one, else
    its students' average (:func:`workers.algorithms.registry.member_probabilities_split`)."""
    return member_probabilities_split(probabilities, member=member).best


def candidate_run(
    name: str, uploads: Sequence[Upload], views: Views, *, n_classes: int, seed: int
) -> tuple[dict, np.ndarray]:
    """One job of candidate ``name`` over the uploads, as ``workers/runner/fusing.py`` runs it, scored on the
    scored rows and (as the job reports) on the evaluation split; and its predicted classes of the scored rows."""
    kind, params = CANDIDATES[name]
    engine = algorithm_get(kind)
    settings = engine.validate(params)
    started = time.perf_counter()
    chosen = [
        uploads[index]
        for index in engine.select([upload.silo.member for upload in uploads], settings, seed=seed)
    ]
    members = [upload.silo.member for upload in chosen]
    signals = [
        engine.member_signal(upload.public, member=member, n_classes=n_classes, params=settings)
        for upload, member in zip(chosen, members)
    ]
    view = fitted_feature_view(settings)
    evaluation = (
        {
            "evaluation": EvaluationRows(
                views.rows("evaluation", view),
                views.labels("evaluation"),
                np.stack([upload.evaluation for upload in chosen]),
                member_signals=np.stack(signals),
            )
        }
        if engine.reads_evaluation(settings)
        else {}
    )
    fusion = engine.fuse(
        sum(signals),
        views.rows("public", view),
        members=members,
        n_classes=n_classes,
        params=settings,
        seed=seed,
        **evaluation,
    )
    seconds = time.perf_counter() - started
    evaluated = _global_probabilities(fusion, chosen, views, "evaluation", view, n_classes)
    report = job_report_rows(fusion, views.labels("evaluation"), seed=seed)
    scored = _global_probabilities(fusion, chosen, views, "scored", view, n_classes)
    return (
        {
            **scores(scored.argmax(axis=1), views.labels("scored")),
            "job_evaluation": {
                **scores(evaluated[report].argmax(axis=1), views.labels("evaluation")[report]),
                "rows": int(len(report)),
            },
            "kind": kind,
            "parameters": params,
            "members": len(members),
            "chosen": fusion.details.get("auto", {}).get("chosen"),
            "details": {  # the fusion's own plain facts (queried rows, abstentions, fidelity, an aggregator...)
                key: value
                for key, value in fusion.details.items()
                if isinstance(value, int | float | str) and not isinstance(value, bool)
            },
            "fusion_seconds": seconds,
        },
        scored.argmax(axis=1),
    )


def _global_probabilities(
    fusion, chosen: Sequence[Upload], views: Views, part: str, view, n_classes
):
    """The global model's probabilities of ``part``: the fitted model's, or the weighted average of the members'
    own (an ensemble bundle, equal weights unless the fusion chose some)."""
    from workers.algorithms.ensemble import member_probabilities

    if fusion.model is not None:
        return member_probabilities(fusion.model, views.rows(part, view), n_classes)
    weights = fusion.details.get("weights") or {}
    return average_probabilities(
        np.stack([getattr(upload, part) for upload in chosen]),
        weights=[
            weights.get(upload.silo.member.key, 1.0 if not weights else 0.0) for upload in chosen
        ],
    )


def baselines(
    silos: Sequence[Silo], views: Views, federation: Federation, *, name: str, seed: int
) -> dict:
    """The majority guess, the average and the best silo (own models) and centralised training."""
    view, truth = TrainingSettings().feature_view(), views.labels("scored")
    pooled = federation.labels[federation.silo_rows]
    own = [
        (
            scores(
                silo.own_model.predict(views.rows("evaluation", view)), views.labels("evaluation")
            ),
            scores(silo.own_model.predict(views.rows("scored", view)), truth),
        )
        for silo in silos
    ]
    best = max(range(len(silos)), key=lambda index: own[index][0]["accuracy"])
    results = {
        "majority": scores(np.full(len(truth), np.bincount(pooled).argmax()), truth),
        "average_silo": {
            key: float(np.mean([scored[key] for _, scored in own]))
            for key in ("accuracy", "balanced_accuracy")
        },
        "best_silo": {
            **own[best][1],
            "silo": best,
            "evaluation_accuracy": own[best][0]["accuracy"],
        },
    }
    centralised = {
        "centralised": OWN_MODEL,
        **({"centralised_xgboost": CENTRAL_XGBOOST} if name == "magic" else {}),
    }
    pooled_x = federation.features(federation.silo_rows, view)
    for key, learner in centralised.items():
        model = fit_aligned(learner, pooled_x, pooled, n_classes=federation.n_classes, seed=seed)
        results[key] = scores(model.predict(views.rows("scored", view)), truth)
    return results


@dataclass(frozen=True)
class OperatorOnly:
    """The operator-only baseline of one setting (:mod:`workers.reproduce.suite_operator`): its scores as a
    baseline entry, its predicted classes of the scored rows and its learning curve's points."""

    scores: dict
    predicted: np.ndarray
    learning_curve: list[dict]


def operator_only_measure(views: Views, *, n_classes: int, seed: int) -> OperatorOnly:
    """The operator-only baseline and its learning curve, scored as every model of the suite is."""
    scored, report, facts = operator_only_predictions(views, n_classes=n_classes, seed=seed)
    report_rows = facts.pop("report_rows")
    truth = views.labels("scored")
    return OperatorOnly(
        scores={
            **scores(scored, truth),
            "job_evaluation": {
                **scores(report, views.labels("evaluation")[report_rows]),
                "rows": int(len(report_rows)),
            },
            **facts,
        },
        predicted=scored,
        learning_curve=[
            {**point, **scores(curve, truth)}
            for point, curve in operator_learning_curve(views, n_classes=n_classes, seed=seed)
        ],
    )


def setting_run(name: str, n_silos: int, seed: int, *, test: bool, log=print) -> dict:
    """One data set, silo count and seed: every baseline and candidate; one JSON-ready entry."""
    started = time.perf_counter()
    frame, label_text = suite_table(name)
    federation = federation_build(frame, label_text, seed=seed, test=test)
    views = Views(federation)
    silos = silos_train(federation, n_silos, seed=seed)
    silo_seconds = time.perf_counter() - started
    uploads = uploads_predict(silos, views, federation.n_classes)
    candidates, predicted = {}, {}
    for candidate in CANDIDATES:
        candidates[candidate], predicted[candidate] = candidate_run(
            candidate, uploads, views, n_classes=federation.n_classes, seed=seed
        )
        log(
            f"  [{name} {n_silos} silos seed {seed}] {candidate}: {candidates[candidate]['accuracy']:.4f}"
        )
    sizes = [len(silo.rows) for silo in silos]
    measured = baselines(silos, views, federation, name=name, seed=seed)
    free = operator_only_measure(views, n_classes=federation.n_classes, seed=seed)
    measured["operator_only"] = free.scores
    best_silo = silos[measured["best_silo"]["silo"]].own_model.predict(
        views.rows("scored", TrainingSettings().feature_view())
    )
    return {
        "dataset": name,
        "silos": n_silos,
        "seed": seed,
        "scored_on": federation.scored_on,
        "rows": {
            "silo": int(len(federation.silo_rows)),
            "public": int(len(federation.public)),
            "evaluation": int(len(federation.evaluation)),
            "scored": int(len(federation.scored)),
        },
        "classes": federation.n_classes,
        "silo_rows": {"min": min(sizes), "median": float(np.median(sizes)), "max": max(sizes)},
        "silos_uploaded": len(uploads),
        "silo_refusals": sorted({silo.refusal.split(":")[0] for silo in silos if silo.refusal}),
        "silos_uploading_own_model": sum(silo.uploaded_own_model for silo in silos),
        "baselines": measured,
        "candidates": candidates,
        "operator_learning_curve": free.learning_curve,
        # the L0 default minus each free alternative on the scored rows, with its paired-bootstrap interval
        "default_versus": default_comparisons(
            views.labels("scored"),
            predicted[DEFAULT_CANDIDATE],
            {"operator_only": free.predicted, "best_silo": best_silo},
            n_classes=federation.n_classes,
            seed=seed,
        ),
        "silo_seconds": silo_seconds,
        "wall_seconds": time.perf_counter() - started,
    }


def save(entries: Sequence[dict], path: Path) -> None:
    """Merge ``entries`` into the results at ``path``, replacing earlier runs of the same setting."""
    runs = json.loads(path.read_text()) if path.exists() else []
    done = {_key(entry) for entry in entries}
    runs = [run for run in runs if _key(run) not in done] + list(entries)
    path.write_text(json.dumps(sorted(runs, key=_key), indent=1))


def _key(run: Mapping) -> tuple:
    return list(SUITE).index(run["dataset"]), run["silos"], run["seed"]


def argument_parser() -> argparse.ArgumentParser:
    """The command line of the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m workers.reproduce.suite")
    parser.add_argument(
        "--datasets", default=",".join(SUITE), help=f"comma-separated of {', '.join(SUITE)}"
    )
    parser.add_argument(
        "--silos", default=",".join(map(str, SILO_COUNTS)), help="silo counts, comma-separated"
    )
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds, from --first-seed on")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--test", action="store_true", help="score on the test split (once, after choosing)"
    )
    parser.add_argument(
        "--summary", action="store_true", help="write docs/results/suite.md and stop"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="the JSON to write (default: docs/results)"
    )
    return parser


def main(argv=None) -> int:
    parser = argument_parser()
    arguments = parser.parse_args(argv)
    if arguments.summary:
        from workers.reproduce.suite_report import summary_write

        print(summary_write())
        return 0
    path = arguments.results or RESULTS["test" if arguments.test else "validation"]
    names = arguments.datasets.split(",")
    for name in names:
        if name not in SUITE:
            parser.error(f"unknown data set {name!r}; choose among {', '.join(SUITE)}")
    silo_counts = [int(count) for count in arguments.silos.split(",")]
    # One BLAS thread: on a shared machine several threads per process make the stacked fusion's small
    # logistic regressions ~15 times slower (measured on titanic: 0.7 s against 10.9 s with two threads).
    with threadpool_limits(limits=1):
        # seeds outermost: a run stopped early covers every data set and silo count with the seeds it finished
        for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
            for name, n_silos in ((name, count) for name in names for count in silo_counts):
                entry = setting_run(name, n_silos, seed, test=arguments.test)
                save([entry], path)
                print(
                    json.dumps(
                        {key: entry[key] for key in ("dataset", "silos", "seed", "wall_seconds")}
                    ),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
