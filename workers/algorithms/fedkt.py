"""FedKT: one-shot federated learning by two tiers of knowledge transfer.

Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting* (IJCAI 2021),
Algorithm 1 and section 4 (privacy levels).

- Party side (:func:`party_fit`, Algorithm 1 lines 1-9): for each of ``s`` partitions shuffle
  the party's data, split it into ``t`` disjoint subsets, train one teacher per subset, count the
  teachers' votes on the queried public examples, optionally add noise to the counts (L2,
  example-level DP), label each queried example with the arg-max and train one student on them.
- Server side (:func:`server_fit`, lines 10-14): every party's ``s`` students predict the public
  data, consistent voting (a party adds ``s`` votes to class m only when all its students predict
  m), optionally noise (L1, party-level DP), arg-max labels, final model on the labelled queried
  examples. Abstentions are not trained on; the tie and abstention rules are in
  :mod:`workers.algorithms.voting`.

Privacy is composed in, not branched on: ``noise`` is ``None`` (L0) or a mechanism with
``noisy_counts(counts) -> counts`` (``workers.privacy.mechanisms``). At L1 the server adds
noise, at L2 the parties do and the server adds none. :func:`fedkt_fit` runs both sides and
hands the noiseless counts to ``workers.privacy.accounting``.

Which public examples are queried is drawn once from a seed, independently of any private data (a
party's own seed on the party side, the server's seed on the server side; the server may instead take the
k-means medoids of the public features, ``query_selection="medoids"``). Every other random
choice (shuffles, model seeds) also derives from the caller's seed through
``numpy.random.SeedSequence``; only DP noise is unseeded, by design.

The noiseless counts kept in the results are for the privacy accountant and stay with whoever
computed them (the silo for party counts, the server for consistent counts): never publish them.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sklearn.ensemble._forest import BaseForest
from sklearn.tree import BaseDecisionTree

from workers.algorithms.stages import StageClock, StageStats, merge_stages
from workers.algorithms.transfer import (
    Query,
    child_seeds,
    choose_queries,
    fit_on_votes,
    fit_semi_supervised,
    predict_classes,
    select_queries,
)
from workers.algorithms.voting import consistent_vote_counts, vote_counts
from workers.learners import Learner, fit_aligned, make_learner

__all__ = [
    "FedKTConfig",
    "FedKTResult",
    "PartyResult",
    "ServerResult",
    "child_seeds",
    "disjoint_partition_students",
    "fedkt_fit",
    "fit_on_votes",
    "fit_parties",
    "party_fit",
    "party_students",
    "predict_classes",
    "select_queries",
    "server_fit",
    "server_step",
    "train_teachers",
]


_NATIVE_TREES = (BaseDecisionTree, BaseForest)


@dataclass(frozen=True)
class PartyResult:
    """One party's output: ``students`` (one per partition, fitted, ``classes_ = 0..K-1``),
    the ``queried_indices`` of the public data it labelled, and per partition the noiseless
    teacher ``vote_counts`` (n_queried × K, for the L2 accountant; never uploaded)."""

    students: tuple[Any, ...]
    queried_indices: np.ndarray
    vote_counts: tuple[np.ndarray, ...]
    stages: dict[str, StageStats] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerResult:
    """The server's output. Arrays are over the queried public examples (``queried_indices``):
    ``consistent_counts`` noiseless (for the L1 accountant), ``noisy_counts`` (``None`` at
    L0/L2), ``labels`` (arg-max), ``abstained`` (no party consistent: all-zero noiseless row),
    ``trained`` (examples the final model was fitted on: the (noisy) max count was > 0)."""

    final_model: Any
    queried_indices: np.ndarray
    consistent_counts: np.ndarray
    noisy_counts: np.ndarray | None
    labels: np.ndarray
    abstained: np.ndarray
    trained: np.ndarray
    stages: dict[str, StageStats] = field(default_factory=dict)


@dataclass(frozen=True)
class FedKTConfig:
    """Hyperparameters of a FedKT run. Learners are family names, ``{"family": ...}`` mappings or
    unfitted scikit-learn classifiers (:func:`workers.learners.make_learner`). A query is a count
    (int) or a fraction of the public data (float in (0, 1])."""

    teacher: Learner
    student: Learner
    final: Learner
    partitions: int = 2
    teachers: int = 5
    party_query: Query = 1.0
    server_query: Query = 1.0


@dataclass(frozen=True)
class FedKTResult:
    """A whole run: ``level`` ("L0", "L1" or "L2"), the parties' and the server's results, the
    ``privacy`` analysis (``workers.privacy.accounting.PrivacyAnalysis``, ``None`` at L0), and
    ``stages``: per stage the summed wall seconds over parties (CPU work) and the largest peak
    RSS, plus ``parties_elapsed`` (wall seconds of the whole, possibly parallel, party side)."""

    level: str
    parties: tuple[PartyResult, ...]
    server: ServerResult
    privacy: Any
    stages: dict[str, StageStats]

    @property
    def final_model(self):
        return self.server.final_model


def train_teachers(
    features, labels, *, n_classes: int, learner: Learner, partitions: int, teachers: int, seed: int
) -> tuple[tuple[Any, ...], ...]:
    """Teachers per partition (Algorithm 1 lines 2-4): for each of ``partitions`` partitions,
    shuffle, split into ``teachers`` disjoint subsets and fit one teacher on each.

    Returns ``[partition][teacher]`` fitted :class:`~workers.learners.AlignedClassifier`.
    """
    n_examples = len(labels)
    if n_examples < teachers:
        raise ValueError(
            f"A party with {n_examples} examples cannot train {teachers} teachers on disjoint subsets."
        )
    partition_seeds = child_seeds(seed, partitions)
    result = []
    for partition_seed in partition_seeds:
        shuffle_seed, *teacher_seeds = child_seeds(partition_seed, teachers + 1)
        subsets = np.array_split(
            np.random.default_rng(shuffle_seed).permutation(n_examples), teachers
        )
        result.append(
            tuple(
                fit_aligned(
                    learner,
                    features[subset],
                    labels[subset],
                    n_classes=n_classes,
                    seed=teacher_seed,
                )
                for subset, teacher_seed in zip(subsets, teacher_seeds)
            )
        )
    return tuple(result)


def disjoint_partition_students(
    features, labels, *, n_classes: int, learner: Learner, partitions: int, seed: int
) -> tuple[Any, ...]:
    """A party's students for a record-level L1 job (issue 40): shuffle its rows once, split them into
    ``partitions`` disjoint parts and fit one student directly on each part's own labelled rows.

    Unlike FedKT's party side (:func:`train_teachers`, where every partition reshuffles *all* rows, so one record
    reaches every student), a record here lies in exactly one part and so can change one student only: the
    sensitivity that :mod:`workers.privacy.accounting` charges a record-level job for (one vote per submission).

    Parameters
    ----------
    features : array (n_examples, n_features)
    labels : int array (n_examples,)
    n_classes : int
    learner : Learner
        What each student is.
    partitions : int
        s: the students, one per disjoint part (each needs at least one row).
    seed : int
        Seeds the shuffle and the students.

    Returns
    -------
    tuple of fitted :class:`~workers.learners.AlignedClassifier`, one per part.
    """
    n_examples = len(labels)
    if not 1 <= partitions <= n_examples:
        raise ValueError(
            f"A party with {n_examples} examples cannot fit {partitions} students on disjoint partitions."
        )
    shuffle_seed, *student_seeds = child_seeds(seed, partitions + 1)
    parts = np.array_split(np.random.default_rng(shuffle_seed).permutation(n_examples), partitions)
    return tuple(
        fit_aligned(learner, features[part], labels[part], n_classes=n_classes, seed=student_seed)
        for part, student_seed in zip(parts, student_seeds)
    )


def party_students(
    teacher_predictions,
    queried_features,
    *,
    n_classes: int,
    student: Learner,
    noise=None,
    seed: int,
) -> tuple[tuple[Any, ...], tuple[np.ndarray, ...], dict[str, StageStats]]:
    """Votes and students of one party (Algorithm 1 lines 5-8) from its teachers' predictions.

    Parameters
    ----------
    teacher_predictions : int array (s, t, n_queried)
        Class predicted by each teacher of each partition on each queried public example.
    queried_features : array (n_queried, n_features)
    noise : mechanism or None
        L2: added to each partition's counts before the arg-max.
    seed : int
        Seeds the students.

    Returns
    -------
    ``(students, noiseless vote counts per partition, stage costs)``.
    """
    clock = StageClock()
    with clock.stage("party_votes"):
        counts = tuple(vote_counts(predictions, n_classes) for predictions in teacher_predictions)
    students = []
    with clock.stage("students"):
        for partition_counts, partition_seed in zip(counts, child_seeds(seed, len(counts))):
            model, *_ = fit_on_votes(
                partition_counts,
                queried_features,
                learner=student,
                n_classes=n_classes,
                seed=partition_seed,
                noise=noise,
            )
            students.append(model)
    return tuple(students), counts, clock.stages


def party_fit(
    features,
    labels,
    public_features,
    *,
    n_classes: int,
    teacher: Learner,
    student: Learner,
    partitions: int = 2,
    teachers: int = 5,
    query: Query = 1.0,
    noise=None,
    seed: int,
    progress: Callable[[str], None] | None = None,
) -> PartyResult:
    """The party side of FedKT (Algorithm 1 lines 1-9) on one party's labelled data.

    Parameters
    ----------
    features, labels : arrays (n_examples, n_features), (n_examples,)
        The party's private data; labels in ``0 .. n_classes-1``.
    public_features : array (n_public, n_features)
    teacher, student : learners
    partitions, teachers : int
        ``s`` and ``t``.
    query : int or float
        Public examples labelled for the students (count or fraction); the L2 privacy knob.
    noise : mechanism or None
        L2: noise added to each partition's teacher counts before the arg-max.
    seed : int
        Seeds the shuffles, the teachers, the query sample and the students.
    progress : callable or None
        Called with a sentence after each step (teachers, votes, students), for a command that reports as it
        works; it changes nothing computed.
    """
    report = progress or (lambda message: None)
    features, labels = np.asarray(features), np.asarray(labels).astype(np.int64)
    public_features = np.asarray(public_features)
    teacher_seed, query_seed, student_seed = child_seeds(seed, 3)
    clock = StageClock()
    with clock.stage("teachers"):
        teacher_models = train_teachers(
            features,
            labels,
            n_classes=n_classes,
            learner=teacher,
            partitions=partitions,
            teachers=teachers,
            seed=teacher_seed,
        )
    report(f"Trained {partitions} × {teachers} teachers on {len(labels)} rows.")
    queried = select_queries(len(public_features), query, seed=query_seed)
    queried_features = public_features[queried]
    with clock.stage("party_votes"):
        predictions = np.stack(
            [predict_classes(models, queried_features) for models in teacher_models]
        )
    report(f"The teachers voted on {len(queried)} public rows; training {partitions} student(s)...")
    students, counts, stages = party_students(
        predictions,
        queried_features,
        n_classes=n_classes,
        student=student,
        noise=noise,
        seed=student_seed,
    )
    return PartyResult(students, queried, counts, merge_stages([clock.stages, stages]))


def server_fit(
    student_predictions,
    public_features,
    *,
    n_classes: int,
    final: Learner,
    query: Query = 1.0,
    noise=None,
    seed: int,
    n_jobs: int = 1,
) -> ServerResult:
    """The server side of FedKT (Algorithm 1 lines 10-14) from the students' predictions.

    Parameters
    ----------
    student_predictions : int array (n_parties, s, n_public)
        Each student's predicted class on every public example (:func:`predict_classes`).
    public_features : array (n_public, n_features)
    final : learner of the final model
    query : int or float
        Public examples the server queries (count or fraction); the L1 privacy knob.
    noise : mechanism or None
        L1: noise added to the consistent vote counts.
    seed : int
        Seeds the query sample and the final model.
    n_jobs : int
        Threads of the final model's fit (forests and XGBoost; the model does not depend on it).
    """
    student_predictions = np.asarray(student_predictions)
    clock = StageClock()
    with clock.stage("server_votes"):
        counts = consistent_vote_counts(
            student_predictions, n_classes, student_predictions.shape[1]
        )
    result = server_step(
        counts,
        public_features,
        n_classes=n_classes,
        final=final,
        query=query,
        noise=noise,
        seed=seed,
        n_jobs=n_jobs,
    )
    return replace(result, stages=merge_stages([clock.stages, result.stages]))


def server_step(
    vote_counts,
    public_features,
    *,
    n_classes: int,
    final: Learner,
    query: Query = 1.0,
    noise=None,
    seed: int,
    n_jobs: int = 1,
    query_selection: str = "random",
    semi_supervised: str = "none",
) -> ServerResult:
    """FedKT's server step (Algorithm 1 lines 11-14) from the parties' summed votes: query public examples,
    add ``noise`` (L1) to their counts, label by arg-max and fit the final model on the non-abstaining ones
    (anchored on every class, :func:`workers.algorithms.transfer.with_every_class`, so that it always exports).
    The one server step of FedKT: :func:`server_fit` (the simulations) and the market's "fedkt" job kind
    (:class:`workers.algorithms.fedkt_fusion.FedKTFusion`, whose members' signals sum to these counts) call it.

    Parameters
    ----------
    vote_counts : array (n_public, n_classes)
        The summed consistent votes (or, for a soft vote, summed probabilities) on every public example.
    public_features : array (n_public, n_features)
    final, query, noise, seed, n_jobs
        As for :func:`server_fit`.
    query_selection : {"random", "medoids"}
        How the queried rows are chosen from the public features (:func:`workers.algorithms.transfer.choose_queries`;
        no label or vote is read, so it costs no privacy).
    semi_supervised : {"none", "label_spreading", "self_training"}
        "none": the final model is fitted on the labelled queried rows only; otherwise it learns from every public
        row (:func:`workers.algorithms.transfer.fit_semi_supervised`, post-processing of the released labels).
    """
    vote_counts, public_features = np.asarray(vote_counts), np.asarray(public_features)
    query_seed, model_seed = child_seeds(seed, 2)
    queried = choose_queries(public_features, query, seed=query_seed, selection=query_selection)
    counts = vote_counts[queried]
    clock = StageClock()
    with clock.stage("final_model"):
        model, noisy, labels, trained = fit_on_votes(
            counts,
            public_features[queried],
            learner=final,
            n_classes=n_classes,
            seed=model_seed,
            noise=noise,
            n_jobs=n_jobs,
            every_class=True,
        )
        if semi_supervised != "none" and len(queried) < len(public_features):
            model = fit_semi_supervised(
                public_features,
                queried[trained],
                labels[trained],
                method=semi_supervised,
                learner=final,
                n_classes=n_classes,
                seed=model_seed,
                n_jobs=n_jobs,
                every_class=True,
            )
    abstained = np.logical_not(counts.any(axis=1))
    return ServerResult(
        model, queried, counts, noisy, labels, np.asarray(abstained), trained, clock.stages
    )


def _party_task(arguments: tuple) -> PartyResult:
    features, labels, public_features, keywords = arguments
    return party_fit(features, labels, public_features, **keywords)


def _limit_threads() -> None:
    import torch

    torch.set_num_threads(1)


def runs_without_the_gil(*learners: Learner) -> bool:
    """True when every learner is a scikit-learn tree or forest: their fits and predictions spend
    their time in Cython that releases the GIL, so threads of one process run them in parallel
    without starting, importing into or pickling to worker processes."""
    return all(isinstance(make_learner(learner), _NATIVE_TREES) for learner in learners)


def fit_parties(
    parties: Sequence[tuple[Any, Any]],
    public_features,
    *,
    n_classes: int,
    config: FedKTConfig,
    noise=None,
    seed: int,
    n_jobs: int = 1,
) -> tuple[PartyResult, ...]:
    """:func:`party_fit` for every party, ``n_jobs`` at a time (1: one after the other in this thread).
    Party ``j`` gets the ``j``-th child seed of ``seed``, so results do not depend on ``n_jobs``.

    Tree and forest learners (:func:`runs_without_the_gil`) run in ``n_jobs`` threads of this
    process, which also works inside a Celery prefork child. Other learners (torch, XGBoost,
    linear) run in worker processes started with ``spawn``: a script calling this with
    ``n_jobs > 1`` needs the ``if __name__ == "__main__":`` guard, and a daemonic process (a Celery
    prefork child) cannot start them, so call it there with ``n_jobs=1`` and fan out with Celery."""
    keywords = {
        "n_classes": n_classes,
        "teacher": config.teacher,
        "student": config.student,
        "partitions": config.partitions,
        "teachers": config.teachers,
        "query": config.party_query,
        "noise": noise,
    }
    tasks = [
        (features, labels, public_features, {**keywords, "seed": party_seed})
        for (features, labels), party_seed in zip(parties, child_seeds(seed, len(parties)))
    ]
    if n_jobs <= 1:
        return tuple(_party_task(task) for task in tasks)
    # Largest parties first: the last to finish are then small ones, and no core idles long waiting for a big
    # party that happened to come last (party sizes differ 100-fold under a Dirichlet partition).
    order = sorted(range(len(tasks)), key=lambda index: -len(tasks[index][1]))
    pool: Executor
    if runs_without_the_gil(config.teacher, config.student):
        pool = ThreadPoolExecutor(max_workers=n_jobs)
    else:
        pool = ProcessPoolExecutor(
            max_workers=n_jobs,
            mp_context=multiprocessing.get_context(
                "spawn"
            ),  # fork after torch/OpenMP start-up can deadlock
            initializer=_limit_threads,
        )
    with pool:
        results = dict(zip(order, pool.map(_party_task, [tasks[index] for index in order])))
    return tuple(results[index] for index in range(len(tasks)))


def predict_students(
    party_results: Sequence[PartyResult], public_features, *, n_jobs: int = 1
) -> np.ndarray:
    """Every party's students' classes on the public data: int64 array (n_parties, s, n_public),
    parties predicted ``n_jobs`` at a time in threads where the students are trees or forests."""

    def predict(party: PartyResult) -> np.ndarray:
        return predict_classes(party.students, public_features)

    if n_jobs > 1 and all(
        isinstance(getattr(student, "estimator_", None), _NATIVE_TREES + (type(None),))
        for party in party_results
        for student in party.students
    ):
        with ThreadPoolExecutor(max_workers=n_jobs) as pool:
            return np.stack(list(pool.map(predict, party_results)))
    return np.stack([predict(party) for party in party_results])


def fedkt_fit(
    parties: Sequence[tuple[Any, Any]],
    public_features,
    *,
    n_classes: int,
    config: FedKTConfig,
    seed: int,
    party_noise=None,
    server_noise=None,
    delta: float = 1e-5,
    n_jobs: int = 1,
) -> FedKTResult:
    """Run FedKT end to end on simulated parties.

    ``parties`` holds each party's ``(features, labels)``. L0: no noise; L1: ``server_noise``;
    L2: ``party_noise`` (the two are exclusive). ``delta`` is the δ of the reported (ε, δ).
    """
    if party_noise is not None and server_noise is not None:
        raise ValueError(
            "Choose one privacy level: party noise (L2) or server noise (L1), not both."
        )
    level = "L2" if party_noise is not None else "L1" if server_noise is not None else "L0"
    public_features = np.asarray(public_features)
    party_seed, server_seed = child_seeds(seed, 2)
    clock = StageClock()
    with clock.stage("parties_elapsed"):
        party_results = fit_parties(
            parties,
            public_features,
            n_classes=n_classes,
            config=config,
            noise=party_noise,
            seed=party_seed,
            n_jobs=n_jobs,
        )
    with clock.stage("server_votes"):
        predictions = predict_students(party_results, public_features, n_jobs=n_jobs)
    server = server_fit(
        predictions,
        public_features,
        n_classes=n_classes,
        final=config.final,
        query=config.server_query,
        noise=server_noise,
        seed=server_seed,
        n_jobs=n_jobs,
    )
    stages = merge_stages([party.stages for party in party_results] + [clock.stages, server.stages])
    privacy = _privacy_analysis(
        level, party_noise or server_noise, party_results, server, config, delta
    )
    return FedKTResult(level, party_results, server, privacy, stages)


def _privacy_analysis(
    level: str, mechanism, party_results, server: ServerResult, config: FedKTConfig, delta: float
):
    if level == "L0":
        return None
    from workers.privacy.accounting import party_noise_privacy, server_noise_privacy

    if level == "L1":
        return server_noise_privacy(
            mechanism=mechanism,
            vote_counts=server.consistent_counts,
            partitions=config.partitions,
            teachers=config.teachers,
            delta=delta,
        )
    return party_noise_privacy(
        mechanism=mechanism,
        party_vote_counts=[list(p.vote_counts) for p in party_results],
        partitions=config.partitions,
        teachers=config.teachers,
        delta=delta,
    )
