"""Validating a stored submission, the worker's side (the validations queue): its models are loaded in the
sandbox and predict a sample of the federation's public rows; the verdict is the first model's problem, or none.
Every state change (claim, decide, release on a transient error) is a service of market.submissions.validation;
this module only computes, and reaches rows through those services and selectors (the contract
``worker-side-reads-no-market-models``).
"""

import logging

import numpy as np
from django.conf import settings
from django.db import InterfaceError, OperationalError

from market.feature_views import model_files_feature_view, stored_features_in_view
from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz, artifact_read
from market.submissions.validation import (
    submission_for_validation,
    submission_validation_claim,
    submission_validation_decide,
)

logger = logging.getLogger(__name__)
#: How far a predicted row may stray from a probability distribution (below 0, or a sum off 1) in float32.
PROBABILITY_TOLERANCE = 1e-3
INTERNAL_ERROR_REASON = "The market could not validate this submission because of an internal error; an operator has been told."


def submission_validate(*, submission_id: int) -> None:
    """Load every model of the submission in the sandbox, predict on public rows, mark it valid or rejected."""
    if not submission_validation_claim(submission_id=submission_id):
        return
    submission = submission_for_validation(submission_id=submission_id)
    try:
        reason = _validation_failure(submission)
    except (
        OperationalError,
        InterfaceError,
    ):  # the database went away: the task hands the row back and retries
        raise
    except Exception:
        logger.exception("Validation of submission %s failed inside the market", submission_id)
        reason = INTERNAL_ERROR_REASON
    submission_validation_decide(submission=submission, reason=reason)


def _sample_public_features(submission, model_files: list) -> np.ndarray:
    features = arrays_from_npz(submission.public_dataset.features_file)["features"]
    n_rows = min(settings.ONEFOLD_VALIDATION_SAMPLE_ROWS, len(features))
    # Seeded by the submission: a retried validation predicts the same rows, so its verdict is not a new draw.
    rows = np.random.default_rng(submission.id).choice(len(features), size=n_rows, replace=False)
    view = model_files_feature_view(model_files)
    return stored_features_in_view(features[np.sort(rows)], submission.public_dataset, view)


def _prediction_problem(probabilities: np.ndarray, *, n_rows: int, n_classes: int) -> str | None:
    if probabilities.shape != (n_rows, n_classes):
        return f"it returned predictions of shape {probabilities.shape}, expected ({n_rows}, {n_classes})."
    if not np.all(np.isfinite(probabilities)):
        return "it predicted non-finite probabilities."
    if np.any(probabilities < -PROBABILITY_TOLERANCE) or not np.allclose(
        probabilities.sum(axis=1), 1, atol=PROBABILITY_TOLERANCE
    ):
        return "its predicted probabilities are not a distribution over the federation's classes."
    return None


def _validation_failure(submission) -> str | None:
    """The reason the submission's models fail validation in the sandbox, or None when all pass."""
    model_files = list(submission.model_files.all())
    sample = _sample_public_features(submission, model_files)
    outcomes = stored_models_predict(
        [artifact_read(model_file.stored_name) for model_file in model_files],
        sample,
        n_classes=submission.federation.n_classes,
    )
    for model_file, outcome in zip(model_files, outcomes):
        problem = outcome.error or _prediction_problem(
            outcome.probabilities, n_rows=len(sample), n_classes=submission.federation.n_classes
        )
        if problem:
            return f"Model file '{model_file.original_name}' failed validation: {problem}"
    return None
