"""Semi-private students (issue 40, item 1): a private FedKT job's global model fitted on the released noisy labels
of the queried public rows together with the operator's own labelled rows, the fit half of the federation's
evaluation split (:func:`workers.algorithms.auto_fusion.evaluation_halves`).

Both are free to use: the noisy labels were released (at L1 with the server's noise, at L2 voted by students the
silos trained with theirs), so a model fitted on them is post-processing (Dwork & Roth, *The Algorithmic
Foundations of Differential Privacy*, Proposition 2.1); the operator's rows belong to no silo. No silo pays any
extra ε for them, and the job's charge does not change.

Which mix the model is fitted on is chosen by cross-fitting inside the fit half only (:func:`semi_private_fit`):
each candidate of :data:`SEMI_PRIVATE_CANDIDATES` is scored out of fold over the fit half's rows
(:func:`workers.algorithms.stacking.out_of_fold`, :data:`workers.algorithms.stacking.FOLDS` stratified folds): a
fold's model is fitted on the noisy public rows and/or the other folds' operator rows and scored on the held-out
fold. The mixes that read the operator's rows are fitted with the job's final model and with the operator-only
model's learner (the market's default forest, :data:`FOREST_SUFFIX` in their names): the private final model was
chosen for a few dozen noisy labels (a regularised logistic regression), which is the wrong learner for hundreds
of true labels of a data set a linear model cannot separate. The best accuracy wins, ties to the earlier candidate
(those using the silos' labels come first); the winner is refitted on the whole fit half. The report half of the
evaluation split is never passed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from workers.algorithms.stacking import FOLDS, out_of_fold
from workers.algorithms.transfer import child_seeds, with_every_class
from workers.learners import Learner, fit_aligned
from workers.metrics import classification_metrics

#: The mixes a semi-private model may be fitted on, in the order ties go: the released noisy labels with the
#: operator's rows, the noisy labels alone (the model of a job without semi-private students), the operator's rows
#: alone (the operator-only model's rows, fitted with the job's final model).
SEMI_PRIVATE_MIXES = ("both", "noisy_labels", "operator_rows")
#: The name suffix of a mix fitted with the operator-only model's learner instead of the job's final model.
FOREST_SUFFIX = "_forest"
#: Every candidate, in the order ties go (a mix that reads no operator row has one learner: the job's model).
SEMI_PRIVATE_CANDIDATES = (
    "both",
    "both" + FOREST_SUFFIX,
    "noisy_labels",
    "operator_rows",
    "operator_rows" + FOREST_SUFFIX,
)
#: The ``semi_private`` setting of a FedKT job: off (the global model is fitted on the noisy labels alone) or
#: cross-fitted (module docstring); the first is what ``validate`` fills in, the second an L1 or L2 job's default.
SEMI_PRIVATE_SETTINGS = ("off", "cross_fitted")
#: The fewest fit-half rows of each of two classes that let the folds score a candidate; with fewer the job keeps
#: the noisy-labels model and its details say why.
SEMI_PRIVATE_MIN_ROWS_PER_CLASS = 2
#: One sentence for the job's privacy report and documentation: why the operator's rows cost no ε.
SEMI_PRIVATE_PRIVACY_NOTE = (
    "The global model was also fitted on the operator's own labelled evaluation rows (the fit half): "
    "post-processing of the released labels plus rows no silo owns, so no silo pays any extra ε for them."
)


@dataclass(frozen=True)
class SemiPrivateModel:
    """What :func:`semi_private_fit` returns: the global ``model``, the ``chosen`` candidate, every candidate's
    out-of-fold accuracy and balanced accuracy (``cross_fitted``) and the operator's rows it could use."""

    model: object
    chosen: str
    cross_fitted: dict[str, dict[str, float]]
    operator_rows: int

    def details(self) -> dict:
        """JSON-ready ``Fusion.details["semi_private"]``."""
        return {
            "chosen": self.chosen,
            "cross_fitted": self.cross_fitted,
            "operator_rows": self.operator_rows,
            "folds": FOLDS,
        }


def semi_private_refusal(operator_labels, *, n_classes: int) -> str | None:
    """Why the operator's rows cannot be cross-fitted (fewer than :data:`SEMI_PRIVATE_MIN_ROWS_PER_CLASS` rows of
    two classes), or None."""
    counts = np.bincount(np.asarray(operator_labels, dtype=np.int64), minlength=n_classes)
    if np.count_nonzero(counts >= SEMI_PRIVATE_MIN_ROWS_PER_CLASS) >= 2:
        return None
    return (
        f"The evaluation split's fit half holds too few labelled rows ({int(counts.sum())}) of two classes to "
        "cross-fit a semi-private model; the global model is fitted on the noisy labels alone."
    )


def semi_private_fit(
    *,
    noisy_model,
    public_features,
    public_labels,
    operator_features,
    operator_labels,
    learner: Learner,
    operator_learner: Learner,
    n_classes: int,
    seed: int,
) -> SemiPrivateModel:
    """The semi-private global model (module docstring).

    Parameters
    ----------
    noisy_model : fitted classifier
        The model fitted on ``public_features`` and ``public_labels`` alone (the job's model without semi-private
        students): the ``noisy_labels`` candidate, kept as it is when chosen.
    public_features, public_labels : arrays (n_labelled, n_features), (n_labelled,)
        The queried public rows that were labelled and their released (noisy) labels.
    operator_features, operator_labels : arrays (n_operator, n_features), (n_operator,)
        The fit half of the evaluation split with its true labels, in the view ``learner`` reads.
    learner : the job's final model
    operator_learner : the operator-only model's learner, fitted as the ``…_forest`` candidates
    seed : int
        Seeds the folds and the fits.
    """
    public_features, operator_features = np.asarray(public_features), np.asarray(operator_features)
    public_labels = np.asarray(public_labels, dtype=np.int64)
    operator_labels = np.asarray(operator_labels, dtype=np.int64)
    fold_seed, model_seed = child_seeds(seed, 2)

    def fitted(candidate: str, rows: np.ndarray):
        if candidate == "noisy_labels":
            return noisy_model
        features, labels = operator_features[rows], operator_labels[rows]
        model_learner = operator_learner if candidate.endswith(FOREST_SUFFIX) else learner
        if candidate.startswith("both"):
            features = np.concatenate([public_features, features])
            labels = np.concatenate([public_labels, labels])
        features, labels = with_every_class(features, labels, n_classes=n_classes)
        return fit_aligned(model_learner, features, labels, n_classes=n_classes, seed=model_seed)

    cross_fitted = {
        candidate: _scores(
            out_of_fold(
                lambda train, held_out, candidate=candidate: np.asarray(
                    fitted(candidate, train).predict_proba(operator_features[held_out])
                ),
                operator_labels,
                n_classes=n_classes,
                seed=fold_seed,
            ),
            operator_labels,
            n_classes=n_classes,
        )
        for candidate in SEMI_PRIVATE_CANDIDATES
    }
    chosen = max(
        SEMI_PRIVATE_CANDIDATES,
        key=lambda candidate: (
            cross_fitted[candidate]["accuracy"],
            -SEMI_PRIVATE_CANDIDATES.index(candidate),
        ),
    )
    model = fitted(chosen, np.arange(len(operator_labels)))
    return SemiPrivateModel(model, chosen, cross_fitted, int(len(operator_labels)))


def _scores(probabilities, labels, *, n_classes: int) -> dict[str, float]:
    metrics = classification_metrics(probabilities, labels, n_classes=n_classes)
    return {
        "accuracy": float(metrics["accuracy"]),
        "balanced_accuracy": float(metrics["balanced_accuracy"]),
    }


def semi_private_line(semi_private: Mapping, *, report_rows: int) -> str:
    """One plain sentence on what a semi-private FedKT model was fitted on (``Fusion.details["semi_private"]``,
    :mod:`workers.algorithms.semi_private`) and where the metrics below come from."""
    if "skipped" in semi_private:
        return (
            f"{semi_private['skipped']} Metrics below are on the report half ({report_rows} rows)."
        )
    rows = f"the operator's {semi_private['operator_rows']} labelled evaluation rows (the fit half)"
    chosen = semi_private["chosen"]
    fitted_on = {
        "both": f"the released noisy labels together with {rows}",
        "noisy_labels": f"the released noisy labels alone ({rows} did not help out of fold)",
        "operator_rows": f"{rows} alone (the released noisy labels did not help out of fold)",
    }[chosen.removesuffix(FOREST_SUFFIX)]
    if chosen.endswith(FOREST_SUFFIX):
        fitted_on += " with the market's default forest instead of the job's final model"
    scores = ", ".join(
        f"{candidate.replace('_', ' ')} {score['accuracy']:.4f}"
        for candidate, score in semi_private["cross_fitted"].items()
    )
    return (
        f"Semi-private model: fitted on {fitted_on}, chosen by cross-fitted accuracy on the fit half ({scores}); "
        f"no silo pays any extra ε for it. Metrics below are on the other {report_rows} rows."
    )
