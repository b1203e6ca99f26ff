"""FedKT's ``vote: auto`` (issue 19, fusion under label skew): every offered fusion is built from the same
uploads, one is chosen on one half of the federation's evaluation split, and the job reports its metrics on
the other half, which the choice never read.

Candidates (:data:`AUTO_CANDIDATES`, in this order; a tie on the criterion goes to the one listed first):

- ``consistent_hard``: FedKT's consistent hard vote (the paper's);
- ``class_weighted``: the consistent votes weighted per class by each silo's declared share of that class
  (W = the job's ``vote_weight_max``);
- ``soft``: the students' averaged probabilities, summed over silos;
- ``ensemble_selected``: Guha, Talwalkar, Smith's ensemble *with selection*: the members whose declared local
  validation scores are the ⌈n/2⌉ best (their ``cross_validation`` strategy with k = ⌈n/2⌉, ties to the
  member listed first), averaged; the global model is then the bundle of those members;
- ``stacked``: the stacked fusion (:mod:`workers.algorithms.stacking`, the "stack" job kind with its default
  aggregator and the job's final model and query), fitted on the selection half. It needs each member's own
  signal (:attr:`EvaluationRows.member_signals`: the fourth block of an ``auto`` member signal is the ensemble
  kind's member signal); without them (or in signals stored before that block) it is not a candidate;
- ``operator_only``: no silo at all (issue 39): the job's final model fitted on the selection half of the
  evaluation split alone, the operator's own labelled rows, which cost no silo anything. It is listed last, so a
  tie goes to a federated candidate; when it is chosen the silos added nothing the operator did not have, and the
  job says so (:func:`auto_choice_sentence`) and credits no silo (``workers.runner.valuing``). Its fit lives in
  :mod:`workers.algorithms.operator_only`.

The ``soft`` candidate is the ensemble of every member distilled into the final model (its labels are the arg-max
of the members' summed probabilities), so distillation of the ensemble needs no candidate of its own.

The three FedKT candidates each fit the job's final model on their own vote labels of the queried public rows
(:meth:`workers.algorithms.fedkt_fusion.FedKTFusion.fuse`, as a job with that ``vote`` would); the ensemble is scored
from the members' own predictions of the evaluation rows. The choice maximises :data:`SELECTION_CRITERION` on
the selection half (:func:`evaluation_halves`: a stratified half of the evaluation split drawn with the job's
seed); the other half is the report half. The stacked candidate is itself fitted on evaluation rows, so its
selection-half score is cross-fitted (:data:`STACKED_FOLDS` stratified folds of the selection half: each fold is
scored by a stack fitted on the others, :func:`stacked_candidate_probabilities`); when it is chosen it is refitted
on the whole selection half, and its metrics, like every candidate's, come from the report half only. The
``operator_only`` candidate is fitted on evaluation rows too and is cross-fitted and refitted the same way
(:func:`~workers.algorithms.operator_only.operator_only_cross_fitted`, the same folds).

Privacy: ``auto`` runs at L0 (and on L2 submissions, whose noise the silos added) only. At L1 every FedKT
candidate would need its own noisy answers from the silos' votes, and choosing among them by their scores
releases something of each: the cost is the sum of the candidates' ε, not the largest, and the ensemble and the
soft vote have no sensitivity the accountant covers. Rather than charge a single release for several, ``auto``
is refused at L1 (:data:`AUTO_REFUSED_AT_L1`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workers.algorithms.operator_only import (
    OPERATOR_ONLY,
    SILOS_ADDED_NOTHING,
    operator_only_cross_fitted,
    operator_only_fusion,
)
from workers.algorithms.registry import Fusion, Member
from workers.metrics import classification_metrics

AUTO_CANDIDATES = (
    "consistent_hard",
    "class_weighted",
    "soft",
    "ensemble_selected",
    "stacked",
    OPERATOR_ONLY,
)
#: The FedKT vote rules among the candidates, in the order of their blocks in an ``auto`` member signal.
AUTO_VOTE_RULES = ("consistent_hard", "class_weighted", "soft")
#: The block of an ``auto`` member signal after the vote rules': the ensemble kind's member signal (the stack's).
ENSEMBLE_BLOCK = len(AUTO_VOTE_RULES)
STACKED_FOLDS = 3
#: The final models an ``auto`` job fits at most: one per vote rule, and for each of the stacked and the
#: operator-only candidate one per fold of its cross-fitting and its refit (what FedKT's ``estimate`` counts
#: against the market's work limit; the operator-only fits read fewer rows, the selection half, so this is an
#: upper bound).
AUTO_FINAL_MODEL_FITS = len(AUTO_VOTE_RULES) + 2 * (STACKED_FOLDS + 1)


def auto_aggregator_fits() -> int:
    """The stacked candidate's aggregator fits at most: a whole stacked fit (its aggregator cross-fitted and refitted,
    :func:`workers.algorithms.stacking.aggregator_fits`) per fold of the candidate's cross-fitting and for its
    refit when it is chosen. Issue 42 profiled them at 45 % of an ``auto`` job, paid even when another candidate
    wins."""
    from workers.algorithms.stacking import DEFAULT_AGGREGATOR, aggregator_fits

    return (STACKED_FOLDS + 1) * aggregator_fits(DEFAULT_AGGREGATOR)


SELECTION_CRITERION = "accuracy"
AUTO_REFUSED_AT_L1 = (
    '"vote": "auto" cannot run at L1: it would fuse every candidate from its own noisy '
    "answers and choose by their scores, which costs the silos the sum of the candidates' ε (and "
    "the soft vote and the ensemble have no sensitivity the accountant covers), while a job is "
    'charged for one release; choose "consistent_hard" or "class_weighted" at L1, or run auto '
    "at L0."
)


@dataclass(frozen=True)
class EvaluationRows:
    """The federation's evaluation split as ``auto`` reads it.

    Attributes
    ----------
    features : array (n_rows, n_features)
        In the job's feature view (the final model's).
    labels : int array (n_rows,)
    member_probabilities : array (n_members, n_rows, n_classes)
        Each member's probabilities (averaged over its model files), in the order of the job's members.
    member_signals : array (n_members, n_public, width) or None
        Each member's own signal of the public rows, as the job kind's ``member_signal`` returned it (the chunks
        store them), in the same order: the stacked fusion (:mod:`workers.algorithms.stack_fusion`) and ``auto``'s
        stacked candidate weigh the members one by one, which the summed signal cannot. ``None`` where no
        engine reads them.
    """

    features: np.ndarray
    labels: np.ndarray
    member_probabilities: np.ndarray
    member_signals: np.ndarray | None = None


#: The fewest evaluation rows of each of two classes or more that let ``auto`` choose on one half and report on
#: the other with every such class in both (:func:`evaluation_allows_auto`).
AUTO_MIN_ROWS_PER_CLASS = 2


def evaluation_allows_auto(class_counts: Sequence[int]) -> bool:
    """Whether an evaluation split with these rows per class holds :data:`AUTO_MIN_ROWS_PER_CLASS` rows of at
    least two classes, so that both of its halves hold them (an L0 FedKT job then defaults to ``auto``)."""
    return sum(count >= AUTO_MIN_ROWS_PER_CLASS for count in class_counts) >= 2


def evaluation_halves(labels, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(selection_rows, report_rows)``: a stratified half of the evaluation rows and the rest, drawn with
    ``seed`` (the job's). Classes are split one by one so each half holds about half of every class; an odd
    class count gives its extra row to the report half. Both are sorted index arrays."""
    labels = np.asarray(labels)
    if len(labels) < 2:
        raise ValueError(
            '"vote": "auto" and the stacked fusion need an evaluation split of at least 2 rows, to '
            "choose or fit on one half and report on the other."
        )
    generator = np.random.default_rng(seed)
    halves = []
    for label in np.unique(labels):
        rows = generator.permutation(np.flatnonzero(labels == label))
        halves.append(rows[: len(rows) // 2])
    selection = np.sort(np.concatenate(halves)).astype(np.int64)
    report = np.setdiff1d(np.arange(len(labels)), selection)
    return selection, report


def fitted_on_evaluation(details: Mapping) -> bool:
    """Whether a fusion with these ``Fusion.details`` read the first of :func:`evaluation_halves` (``auto``'s choice,
    a stacked fusion's fit, a semi-private model's fit): its job then reports every metric on the other half only."""
    return "auto" in details or "stack" in details or "semi_private" in details


def auto_member_signal(
    probabilities, *, member: Member, n_classes: int, weight_max: int
) -> np.ndarray:
    """A member's summable ``auto`` signal ``(n_public, 4 × n_classes)`` from the probabilities of all its model
    files: its students' consistent votes, class-weighted consistent votes and averaged probabilities (the blocks
    of :data:`AUTO_VOTE_RULES`; the students vote, never the silo's own model, and a submission with s_i students
    votes s_i) and the ensemble kind's member signal of all its files (:data:`ENSEMBLE_BLOCK`, the stacked
    candidate's input: the silo's own model where it has one) side by side. The first block is the consistent
    vote, which the runner's contribution rule reads."""
    from workers.algorithms.registry import algorithm_get, member_probabilities_split
    from workers.algorithms.voting import (
        class_vote_weights,
        consistent_vote_counts,
        soft_vote_scores,
        weighted_consistent_vote_counts,
    )

    probabilities = np.asarray(probabilities)
    students = member_probabilities_split(probabilities, member=member).students
    predictions = students.argmax(axis=2)[None]
    weights = class_vote_weights(member.label_distribution, n_classes, maximum=weight_max)
    return np.concatenate(
        [
            consistent_vote_counts(predictions, n_classes, len(students)).astype(np.float64),
            weighted_consistent_vote_counts(predictions, n_classes, weights[None]).astype(
                np.float64
            ),
            soft_vote_scores(students[None]),
            algorithm_get("ensemble").member_signal(
                probabilities, member=member, n_classes=n_classes, params={}
            ),
        ],
        axis=1,
    )


def ensemble_block(signals, n_classes: int) -> np.ndarray:
    """The ensemble kind's member signals (:data:`ENSEMBLE_BLOCK`) out of ``auto`` signals ``(..., n_public, 4K)``."""
    return np.asarray(signals)[..., ENSEMBLE_BLOCK * n_classes : (ENSEMBLE_BLOCK + 1) * n_classes]


def signal_block(signal_sum, rule: str, n_classes: int) -> np.ndarray:
    """The summed signal of one FedKT vote rule out of an ``auto`` signal sum (integers for the vote counts)."""
    index = AUTO_VOTE_RULES.index(rule)
    block = np.asarray(signal_sum)[:, index * n_classes : (index + 1) * n_classes]
    return block if rule == "soft" else np.rint(block).astype(np.int64)


def ensemble_members(members: Sequence[Member]) -> list[int]:
    """Guha's cross-validation selection with k = ⌈n/2⌉ (the ``ensemble_selected`` candidate's members)."""
    from workers.algorithms.selection import select_members

    return select_members(
        members, strategy="cross_validation", k=max(1, math.ceil(len(members) / 2))
    )


def _scores(probabilities, labels, n_classes: int) -> dict:
    metrics = classification_metrics(probabilities, labels, n_classes=n_classes)
    return {"accuracy": metrics["accuracy"], "balanced_accuracy": metrics["balanced_accuracy"]}


def auto_fuse(
    engine,
    signal_sum,
    public_features,
    *,
    members: Sequence[Member],
    n_classes: int,
    settings: Mapping,
    evaluation: EvaluationRows | None,
    seed: int,
) -> Fusion:
    """Every candidate, scored on the selection half; the chosen one's :class:`Fusion`, whose ``details["auto"]``
    names the choice and every candidate's selection-half scores (``engine``: the FedKT engine)."""
    from workers.algorithms.ensemble import member_probabilities

    if evaluation is None:
        raise ValueError(
            '"vote": "auto" chooses on the federation\'s evaluation split, which was not given.'
        )
    labels = np.asarray(evaluation.labels, dtype=np.int64)
    if np.asarray(evaluation.member_probabilities).shape[:2] != (len(members), len(labels)):
        raise ValueError(
            '"vote": "auto" needs every member\'s probabilities of every evaluation row.'
        )
    selection, report = evaluation_halves(labels, seed=seed)
    base = {key: value for key, value in settings.items() if key not in ("vote", "vote_weight_max")}
    fusions, probabilities = {}, {}
    for rule in AUTO_VOTE_RULES:
        rule_settings = (
            {**base, "vote": rule, "vote_weight_max": settings["vote_weight_max"]}
            if rule == "class_weighted"
            else {**base, "vote": rule}
            if rule == "soft"
            else base
        )
        fusions[rule] = engine.fuse(
            signal_block(signal_sum, rule, n_classes),
            public_features,
            members=members,
            n_classes=n_classes,
            params=rule_settings,
            seed=seed,
        )
        probabilities[rule] = member_probabilities(
            fusions[rule].model, evaluation.features, n_classes
        )
    chosen_members = ensemble_members(members)
    probabilities["ensemble_selected"] = np.asarray(
        evaluation.member_probabilities, dtype=np.float64
    )[chosen_members].mean(axis=0)[selection]
    for rule in AUTO_VOTE_RULES:
        probabilities[rule] = probabilities[rule][selection]
    stack_settings = stacked_settings(settings)
    signals = evaluation.member_signals
    # a job whose chunks were stored before the ensemble block existed has no stacked candidate
    if signals is not None and np.shape(signals)[-1] >= (ENSEMBLE_BLOCK + 1) * n_classes:
        probabilities["stacked"] = stacked_candidate_probabilities(
            evaluation,
            public_features,
            selection=selection,
            settings=stack_settings,
            n_classes=n_classes,
            seed=seed,
        )
    features = np.asarray(evaluation.features)
    probabilities[OPERATOR_ONLY] = operator_only_cross_fitted(
        features[selection],
        labels[selection],
        final_model=settings["final_model"],
        n_classes=n_classes,
        folds=STACKED_FOLDS,
        seed=seed,
    )
    candidates = [name for name in AUTO_CANDIDATES if name in probabilities]
    scores = {
        name: _scores(probabilities[name], labels[selection], n_classes) for name in candidates
    }
    chosen = max(
        candidates,
        key=lambda name: (scores[name][SELECTION_CRITERION], -AUTO_CANDIDATES.index(name)),
    )
    details = {
        "chosen": chosen,
        "criterion": SELECTION_CRITERION,
        "selection_rows": int(len(selection)),
        "report_rows": int(len(report)),
        "candidates": scores,
        "ensemble_members": int(len(chosen_members)),
    }
    if chosen == OPERATOR_ONLY:
        return operator_only_fusion(
            features[selection],
            labels[selection],
            final_model=settings["final_model"],
            n_public=len(public_features),
            n_classes=n_classes,
            seed=seed,
            details=details,
        )
    if chosen == "stacked":
        stacked = _stacked_fit(
            evaluation,
            public_features,
            fit_rows=selection,
            settings=stack_settings,
            n_classes=n_classes,
            seed=seed,
        )
        return Fusion(
            stacked.model,
            stacked.public_labels,
            stacked.trained,
            None,
            {"stack": {**stacked.details, "report_rows": int(len(report))}, "auto": details},
        )
    if chosen != "ensemble_selected":
        fusion = fusions[chosen]
        return Fusion(
            fusion.model, fusion.labels, fusion.trained, None, {**fusion.details, "auto": details}
        )
    soft = signal_block(signal_sum, "soft", n_classes)
    kept = set(chosen_members)
    weights = {member.key: 1.0 if index in kept else 0.0 for index, member in enumerate(members)}
    return Fusion(
        None,
        soft.argmax(axis=1),
        np.zeros(len(soft), dtype=bool),
        None,
        {"n_members": len(chosen_members), "weights": weights, "auto": details},
    )


def stacked_settings(settings: Mapping) -> dict:
    """The stacked candidate's settings: the stack kind's default aggregator, the FedKT job's final model and
    query."""
    from workers.algorithms.stacking import DEFAULT_AGGREGATOR

    return {
        "aggregator": DEFAULT_AGGREGATOR,
        "final_model": settings["final_model"],
        **{key: settings[key] for key in ("query_fraction", "query_count") if key in settings},
    }


def _stacked_fit(
    evaluation: EvaluationRows, public_features, *, fit_rows, settings, n_classes, seed
):
    from workers.algorithms.stacking import stacked_fit

    return stacked_fit(
        ensemble_block(evaluation.member_signals, n_classes),
        public_features,
        member_evaluation=evaluation.member_probabilities,
        evaluation_features=evaluation.features,
        evaluation_labels=evaluation.labels,
        fit_rows=fit_rows,
        settings=settings,
        n_classes=n_classes,
        seed=seed,
        refuse=False,
    )


def stacked_candidate_probabilities(
    evaluation: EvaluationRows, public_features, *, selection, settings, n_classes: int, seed: int
) -> np.ndarray:
    """The stacked candidate's probabilities of the ``selection`` rows, cross-fitted: each of
    :data:`STACKED_FOLDS` stratified folds of them is predicted by the global model of a stack fitted on the other
    folds only (never on the report half)."""
    from workers.algorithms.ensemble import member_probabilities
    from workers.algorithms.stacking import out_of_fold

    selection = np.asarray(selection, dtype=np.int64)
    features = np.asarray(evaluation.features)

    def predict_fold(train, held_out):
        stacked = _stacked_fit(
            evaluation,
            public_features,
            fit_rows=selection[train],
            settings=settings,
            n_classes=n_classes,
            seed=seed,
        )
        return member_probabilities(stacked.model, features[selection[held_out]], n_classes)

    return out_of_fold(
        predict_fold,
        np.asarray(evaluation.labels, dtype=np.int64)[selection],
        n_classes=n_classes,
        folds=STACKED_FOLDS,
        seed=seed,
    )


def auto_choice_sentence(choice: Mapping) -> str:
    """The job log's sentence on what ``auto`` chose (``choice``: ``Fusion.details["auto"]``), with
    :data:`SILOS_ADDED_NOTHING` after it when the choice was :data:`OPERATOR_ONLY`."""
    sentence = (
        f"Fusion chosen by auto: {choice['chosen']} (best {choice['criterion']} on "
        f"{choice['selection_rows']} evaluation rows); metrics below are on the other "
        f"{choice['report_rows']}."
    )
    return f"{sentence} {SILOS_ADDED_NOTHING}" if choice["chosen"] == OPERATOR_ONLY else sentence
