"""Which view of a federation's features each model reads (:mod:`workers.features`: one-hot or ordinal).

The market stores public data and evaluation splits once, in the one-hot view; a model reading the
ordinal view gets the same rows through :func:`workers.features.features_in_view`.

- A submission's view is declared at upload (``feature_view``, checked against the models' input
  width) and kept in each of its model files' ``info``. A submission uploaded before views existed
  has none there and reads the one-hot view.
- A global model's view follows the learner the job fits it with on public features, as the engine's
  schema says (:func:`workers.algorithms.schema.fitted_feature_view`). It is kept in the global model's
  ``lineage``; a model without one reads the one-hot view.
"""

from __future__ import annotations

import numpy as np

from workers.features import ONE_HOT_VIEW, features_in_view

__all__ = [
    "global_model_feature_view",
    "model_files_feature_view",
    "stored_features_in_view",
]


def model_files_feature_view(model_files) -> str:
    """The view of a submission's model files (all were checked against the same view at upload)."""
    views = {
        (model_file.info or {}).get("feature_view", ONE_HOT_VIEW) for model_file in model_files
    }
    return views.pop() if len(views) == 1 else ONE_HOT_VIEW


def global_model_feature_view(global_model) -> str:
    return (global_model.lineage or {}).get("feature_view", ONE_HOT_VIEW)


def stored_features_in_view(features: np.ndarray, public_dataset, view: str) -> np.ndarray:
    """Stored one-hot ``features`` of ``public_dataset``'s specification in ``view``."""
    return features_in_view(features, public_dataset.feature_spec, view)
