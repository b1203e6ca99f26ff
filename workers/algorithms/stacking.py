"""Stacked fusion (issue 31): learn from labelled rows how to combine the members' class probabilities, then
distil that aggregate into one compact model on the public rows.

The members are the silos' uploaded models; each gives class probabilities ``(n_rows, K)`` of a row (the ensemble
kind's member signal). An *aggregator* maps the members' probabilities of a row to one distribution
(:class:`Aggregator`):

- ``logistic``: a multinomial logistic regression (L2, ``C`` = :data:`LOGISTIC_C`) on the members' log-probabilities
  (floored at :data:`PROBABILITY_FLOOR`), side by side. Its intercepts are a per-class bias: they move the
  decision towards the classes the members under-predict (label skew across silos), which the members' plain
  average cannot. This is the small trained aggregator of FENS (Allouah et al., 2024) over frozen local models.
- ``weights``: one non-negative weight per member, summing to 1, that minimise the log loss of the weighted
  average of the members' probabilities (a weighted ensemble: it trusts the members that are right more).

The aggregator is fitted on *fit rows* (the job's half of the evaluation split, :func:`stacked_fit`); which
aggregator to use (``auto``: the better out-of-fold accuracy of the two, ties to ``logistic``; the mean of
accuracy and balanced accuracy chose no better on validation rows, ``docs/results/stack.md``) and whether the fit
is any use are judged by cross-fitting within the fit rows (:func:`out_of_fold`, :data:`FOLDS` stratified folds):
a stack whose out-of-fold predictions are neither more accurate than the majority class of the training folds
nor better balanced than that constant is refused with a ValueError (:func:`constant_refusal`). Rows the fit did
not read (the report half) are never passed here.

The global model is the job's ``final_model`` fitted on the queried public rows labelled with the aggregate's
arg-max, plus the fit rows with their true labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from workers.algorithms.transfer import child_seeds, queried_rows
from workers.learners import fit_aligned
from workers.metrics import classification_metrics

AGGREGATORS = ("logistic", "weights")
#: The aggregator setting's choices: one of :data:`AGGREGATORS`, or ``auto`` (the better of them out of fold).
AGGREGATOR_CHOICES = (*AGGREGATORS, "auto")
#: The aggregator of a stack job that names none, and of ``vote: auto``'s stacked candidate.
DEFAULT_AGGREGATOR = "auto"
FOLDS = 5
LOGISTIC_C = 1.0
PROBABILITY_FLOOR = 1e-4


def aggregator_fits(aggregator: str) -> int:
    """The aggregator fits of one :func:`stacked_fit` with the ``aggregator`` setting: each kind it weighs once per
    fold of its cross-fitting (:data:`FOLDS`; ``auto`` weighs both :data:`AGGREGATORS`), then the chosen one's refit
    on every fit row. An upper bound: a fold whose training part holds one class fits nothing."""
    kinds = len(AGGREGATORS) if aggregator == "auto" else 1
    return kinds * FOLDS + 1


@dataclass(frozen=True)
class Aggregator:
    """A fitted aggregator (module docstring): ``kind`` is one of :data:`AGGREGATORS`; ``weights`` the members'
    weights (``weights``), ``logistic`` the fitted regression (``logistic``; its ``classes_`` may be a subset)."""

    kind: str
    n_classes: int
    weights: np.ndarray | None = None
    logistic: LogisticRegression | None = None

    def probabilities(self, member_probabilities) -> np.ndarray:
        """``(n, K)`` aggregate of the members' probabilities ``(m, n, K)``."""
        member_probabilities = np.asarray(member_probabilities, dtype=np.float64)
        if self.weights is not None:
            return np.tensordot(self.weights, member_probabilities, axes=1)
        if self.logistic is None:
            raise ValueError("An aggregator holds either member weights or a fitted regression.")
        aggregate = np.zeros((member_probabilities.shape[1], self.n_classes))
        aggregate[:, self.logistic.classes_] = self.logistic.predict_proba(
            _log_features(member_probabilities)
        )
        return aggregate


def _log_features(member_probabilities: np.ndarray) -> np.ndarray:
    """``(n, m × K)``: each member's floored log-probabilities, side by side."""
    logs = np.log(np.clip(member_probabilities, PROBABILITY_FLOOR, 1.0))
    return np.transpose(logs, (1, 0, 2)).reshape(logs.shape[1], -1)


def _fitted_weights(member_probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Non-negative weights summing to 1 (a softmax of free parameters, started equal) that minimise the mean log
    loss of the weighted average of the members' probabilities of the true classes."""
    truth = member_probabilities[:, np.arange(len(labels)), labels]  # (m, n)

    def loss_and_gradient(theta):
        weights = np.exp(theta - theta.max())
        weights /= weights.sum()
        mixed = np.maximum(weights @ truth, PROBABILITY_FLOOR)
        per_member = -(truth / mixed).mean(axis=1)  # d loss / d weight
        return -np.log(mixed).mean(), weights * (per_member - weights @ per_member)

    theta = minimize(loss_and_gradient, np.zeros(len(truth)), jac=True, method="L-BFGS-B").x
    weights = np.exp(theta - theta.max())
    return weights / weights.sum()


def aggregator_fit(kind: str, member_probabilities, labels, *, n_classes: int) -> Aggregator:
    """The aggregator ``kind`` fitted on the members' probabilities ``(m, n, K)`` of rows with true ``labels``."""
    member_probabilities = np.asarray(member_probabilities, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if kind == "weights":
        return Aggregator(kind, n_classes, weights=_fitted_weights(member_probabilities, labels))
    if kind != "logistic":
        raise ValueError(f"The aggregator must be one of {', '.join(AGGREGATORS)}, not {kind!r}.")
    if len(np.unique(labels)) < 2:
        raise ValueError(
            "A stacked fusion needs rows of at least two classes in the evaluation split's fit half."
        )
    logistic = LogisticRegression(C=LOGISTIC_C, max_iter=2000)
    return Aggregator(
        kind, n_classes, logistic=logistic.fit(_log_features(member_probabilities), labels)
    )


def stratified_folds(labels, *, folds: int, seed: int) -> np.ndarray:
    """The fold (0..folds-1) of each row: every class's rows dealt in turn after a seeded shuffle, so each fold
    holds about a ``1/folds`` share of every class."""
    labels = np.asarray(labels)
    fold = np.empty(len(labels), dtype=np.int64)
    generator = np.random.default_rng(seed)
    for label in np.unique(labels):
        rows = generator.permutation(np.flatnonzero(labels == label))
        fold[rows] = np.arange(len(rows)) % folds
    return fold


def out_of_fold(
    predict_fold, labels, *, n_classes: int, folds: int = FOLDS, seed: int
) -> np.ndarray:
    """``(n, K)`` cross-fitted probabilities: ``predict_fold(train, held_out)`` (index arrays into the rows) fits on
    ``train`` only and returns its probabilities of ``held_out``; a training part of one class predicts that class."""
    labels = np.asarray(labels, dtype=np.int64)
    fold = stratified_folds(labels, folds=folds, seed=seed)
    predicted = np.zeros((len(labels), n_classes))
    for index in range(folds):
        held_out, train = np.flatnonzero(fold == index), np.flatnonzero(fold != index)
        if len(held_out) == 0:
            continue
        present = np.unique(labels[train])
        if len(present) < 2:
            predicted[held_out, present[0] if len(present) else 0] = 1.0
            continue
        predicted[held_out] = predict_fold(train, held_out)
    return predicted


def constant_out_of_fold(labels, *, n_classes: int, folds: int = FOLDS, seed: int) -> np.ndarray:
    """The constant model cross-fitted like the stack: each fold predicts its training folds' majority class."""
    labels = np.asarray(labels, dtype=np.int64)

    def majority(train, held_out):
        predicted = np.zeros((len(held_out), n_classes))
        predicted[:, np.bincount(labels[train], minlength=n_classes).argmax()] = 1.0
        return predicted

    return out_of_fold(majority, labels, n_classes=n_classes, folds=folds, seed=seed)


def _scores(probabilities, labels, n_classes: int) -> dict:
    metrics = classification_metrics(probabilities, labels, n_classes=n_classes)
    return {
        "accuracy": float(metrics["accuracy"]),
        "balanced_accuracy": float(metrics["balanced_accuracy"]),
    }


def constant_refusal(scores: Mapping, constant: Mapping, *, rows: int) -> str | None:
    """Why a stack scoring ``scores`` out of fold cannot be published, or None: it must beat the constant model's
    out-of-fold ``constant`` scores in accuracy or in balanced accuracy."""
    if (
        scores["accuracy"] > constant["accuracy"]
        or scores["balanced_accuracy"] > constant["balanced_accuracy"]
    ):
        return None
    return (
        f"The stacked fusion cannot beat a constant model: cross-fitted on the {rows} rows of the evaluation "
        f"split's fit half it scores accuracy {scores['accuracy']:.3f} and balanced accuracy "
        f"{scores['balanced_accuracy']:.3f}, against {constant['accuracy']:.3f} and "
        f"{constant['balanced_accuracy']:.3f} for always predicting the majority class; the members' "
        "predictions carry too little about the labels (choose other submissions or a larger evaluation split)."
    )


@dataclass(frozen=True)
class StackedModel:
    """What :func:`stacked_fit` returns: the global ``model``, the aggregate's ``public_labels`` (``(n_public,)``),
    the public rows the model was fitted on (``trained``, boolean) and JSON-ready ``details``."""

    model: object
    aggregator: Aggregator
    public_labels: np.ndarray
    trained: np.ndarray
    details: dict = field(default_factory=dict)


def stacked_fit(
    member_public,
    public_features,
    *,
    member_evaluation,
    evaluation_features,
    evaluation_labels,
    fit_rows,
    settings: Mapping,
    n_classes: int,
    seed: int,
    refuse: bool = True,
) -> StackedModel:
    """The stacked global model fitted on the evaluation rows ``fit_rows`` only (module docstring).

    ``member_public`` ``(m, n_public, K)`` and ``member_evaluation`` ``(m, n_evaluation, K)``: the members'
    probabilities; ``settings``: ``aggregator`` (:data:`AGGREGATOR_CHOICES`), ``final_model`` (a learner) and the
    public rows' query (``query_fraction`` / ``query_count``). ``refuse``: raise :func:`constant_refusal`'s
    sentence as a ValueError (a candidate of ``vote: auto`` that is scored anyway passes False).
    """
    fit_rows = np.asarray(fit_rows, dtype=np.int64)
    labels = np.asarray(evaluation_labels, dtype=np.int64)[fit_rows]
    member_fit = np.asarray(member_evaluation, dtype=np.float64)[:, fit_rows]
    if len(np.unique(labels)) < 2:
        raise ValueError(
            "A stacked fusion needs rows of at least two classes in the evaluation split's fit half; this "
            f"one holds {len(labels)} row(s) of one class."
        )
    fold_seed, proxy_seed, model_seed = child_seeds(seed, 3)
    kinds = AGGREGATORS if settings["aggregator"] == "auto" else (settings["aggregator"],)
    candidates = {
        kind: _scores(
            out_of_fold(
                lambda train, held_out, kind=kind: aggregator_fit(
                    kind, member_fit[:, train], labels[train], n_classes=n_classes
                ).probabilities(member_fit[:, held_out]),
                labels,
                n_classes=n_classes,
                seed=fold_seed,
            ),
            labels,
            n_classes,
        )
        for kind in kinds
    }
    chosen = max(kinds, key=lambda kind: (candidates[kind]["accuracy"], -kinds.index(kind)))
    constant = _scores(
        constant_out_of_fold(labels, n_classes=n_classes, seed=fold_seed), labels, n_classes
    )
    refusal = constant_refusal(candidates[chosen], constant, rows=len(labels))
    if refusal and refuse:
        raise ValueError(refusal)
    aggregator = aggregator_fit(chosen, member_fit, labels, n_classes=n_classes)
    public_features = np.asarray(public_features)
    public_labels = aggregator.probabilities(member_public).argmax(axis=1)
    proxy = queried_rows(len(public_features), settings, seed=proxy_seed)
    model = fit_aligned(
        settings["final_model"],
        np.concatenate([public_features[proxy], np.asarray(evaluation_features)[fit_rows]]),
        np.concatenate([public_labels[proxy], labels]),
        n_classes=n_classes,
        seed=model_seed,
    )
    trained = np.zeros(len(public_features), dtype=bool)
    trained[proxy] = True
    details = {
        "aggregator": chosen,
        "fit_rows": int(len(fit_rows)),
        "folds": FOLDS,
        "out_of_fold": candidates,
        "cross_fitted": candidates[chosen],
        "constant": constant,
        **({"refusal": refusal} if refusal else {}),
    }
    return StackedModel(model, aggregator, public_labels, trained, details)
