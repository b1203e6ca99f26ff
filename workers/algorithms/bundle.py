"""A global model that is an ensemble, saved as a *bundle* (the one format: :mod:`workers.modelio.bundle`): a
zip of its members' safe-format files and a ``manifest.json`` ``{"n_classes", "n_features", "members":
[{"file", "format", "weight", "feature_view"}]}`` (Guha et al., *One-Shot Federated Learning*, section 3: the
ensemble is the model). A member's optional ``feature_view`` (:mod:`workers.features`: ``one_hot``, the
default, or ``ordinal``) is the view of the federation's features it reads; the bundle itself reads the one-hot view
(``n_features`` wide), and :class:`BundleClassifier` hands each member its own view, converted with the
federation's feature specification (the manifest's ``feature_spec``, or the one given to the classifier).

Reading a bundle never runs a member: :func:`bundle_read` only checks the archive (names, sizes,
manifest). :class:`BundleClassifier` predicts by handing the member files to
:func:`workers.modelio.predict_in_sandbox` (resource-limited child processes, after the same
structural checks as an upload) and averaging with the manifest's weights.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from workers.modelio.base import ArtifactFormat
from workers.modelio.bundle import bundle_read


def safe_member_file(model, *, n_features: int, n_classes: int) -> tuple[str, bytes]:
    """``(format, bytes)`` of one fitted member in an upload format: XGBoost → "xgboost-json", a torch
    zoo network → "safetensors", a kernel student and other scikit-learn models → "onnx".

    A model wrapped in :class:`~workers.learners.AlignedClassifier` is exported through its inner
    estimator, which must have seen every class (else the file could not name the classes).
    """
    from workers.algorithms.kernel_distillation import KernelDistilledClassifier
    from workers.algorithms.kernel_onnx import kernel_student_onnx
    from workers.modelio.export import (
        export_sklearn_onnx,
        export_torch_safetensors,
        export_xgboost_json,
    )

    inner = getattr(model, "estimator_", model)
    present = getattr(model, "present_classes_", None)
    trained_on = (
        [] if present is None else [int(label) for label in present]
    )  # no numpy reprs in sentences
    if inner is None or (present is not None and len(present) != n_classes):
        raise ValueError(
            f"A member trained on classes {trained_on} of {n_classes} cannot be saved on its own; "
            "save the ensemble without it or retrain it on every class."
        )
    if isinstance(inner, KernelDistilledClassifier):
        return "onnx", kernel_student_onnx(inner, n_features)
    if type(inner).__name__ == "XGBClassifier":
        return ArtifactFormat.XGBOOST_JSON, export_xgboost_json(inner)
    if hasattr(inner, "module_"):
        return "safetensors", export_torch_safetensors(inner.module_, inner.spec_)
    return "onnx", export_sklearn_onnx(inner, n_features)


class BundleClassifier(ClassifierMixin, BaseEstimator):
    """A saved ensemble as a scikit-learn classifier that runs every member in the sandbox.

    Parameters
    ----------
    bundle : bytes
        A bundle zip (:func:`bundle_write`).
    limits : workers.modelio.SandboxLimits or None
        Limits of the child processes (defaults when ``None``).
    feature_spec : dict or None
        The federation's feature specification (:func:`workers.features.infer_feature_spec`), needed when a
        member reads the ordinal view and the manifest holds no ``feature_spec``. ``X`` is always the one-hot
        view; each member gets its own.
    """

    def __init__(self, bundle: bytes = b"", limits=None, feature_spec=None):
        self.bundle = bundle
        self.limits = limits
        self.feature_spec = feature_spec

    def fit(self, X=None, y=None):
        self.manifest_, self.member_files_ = bundle_read(self.bundle)
        self.classes_ = np.arange(self.manifest_["n_classes"])
        self.n_features_in_ = self.manifest_["n_features"]
        self.member_views_ = [
            member.get("feature_view", "one_hot") for member in self.manifest_["members"]
        ]
        self.feature_spec_ = self.feature_spec or self.manifest_.get("feature_spec")
        if any(view != "one_hot" for view in self.member_views_) and not isinstance(
            self.feature_spec_, dict
        ):
            raise ValueError(
                "Members of this bundle read the ordinal view of the features; give the federation's "
                "feature specification (BundleClassifier(bundle, feature_spec=...)) to convert the "
                "one-hot rows for them."
            )
        return self

    def _member_outcomes(self, features: np.ndarray) -> list:
        """Each member's sandbox outcome on ``features`` (one-hot) in its own view, in manifest order."""
        from workers.features import features_in_view
        from workers.modelio import SandboxLimits, predict_in_sandbox

        outcomes = [None] * len(self.member_files_)
        for view in sorted(set(self.member_views_)):
            positions = [
                index for index, member_view in enumerate(self.member_views_) if member_view == view
            ]
            in_view = (
                features
                if view == "one_hot"
                else features_in_view(features, self.feature_spec_, view)
            )
            predicted = predict_in_sandbox(
                [self.member_files_[index] for index in positions],
                np.asarray(in_view, dtype=np.float32),
                n_classes=len(self.classes_),
                limits=self.limits or SandboxLimits(),
            )
            for index, outcome in zip(positions, predicted):
                outcomes[index] = outcome
        return outcomes

    def predict_proba(self, X) -> np.ndarray:
        features = np.asarray(X, dtype=np.float32)
        outcomes = self._member_outcomes(features)
        failed = [
            f"{member['file']}: {outcome.error}"
            for member, outcome in zip(self.manifest_["members"], outcomes)
            if outcome.error
        ]
        if failed:
            raise ValueError("Members of the bundle could not predict: " + "; ".join(failed))
        weights = np.array(
            [member["weight"] for member in self.manifest_["members"]], dtype=np.float64
        )
        stacked = np.stack([outcome.probabilities for outcome in outcomes])
        return np.tensordot(weights / weights.sum(), stacked, axes=1)

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.predict_proba(X), axis=1)
