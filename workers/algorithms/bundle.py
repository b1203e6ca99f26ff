"""A global model that is an ensemble, saved as a *bundle*: a zip of its members' safe-format
files and a ``manifest.json`` ``{"n_classes", "n_features", "members": [{"file", "format",
"weight", "feature_view"}]}`` (Guha et al., *One-Shot Federated Learning*, section 3: the ensemble is the
model). A member's optional ``feature_view`` (:mod:`workers.features`: ``one_hot``, the default, or
``ordinal``) is the view of the federation's features it reads; the bundle itself reads the one-hot view
(``n_features`` wide), and :class:`BundleClassifier` hands each member its own view, converted with the
federation's feature specification (the manifest's ``feature_spec``, or the one given to the classifier).

Reading a bundle never runs a member: :func:`bundle_read` only checks the archive (names, sizes,
manifest). :class:`BundleClassifier` predicts by handing the member files to
:func:`workers.modelio.predict_in_sandbox` (resource-limited child processes, after the same
structural checks as an upload) and averaging with the manifest's weights.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

MAX_BUNDLE_MEMBERS = 1000
MAX_MEMBER_BYTES = 100 * 2**20
MAX_BUNDLE_BYTES = 2 * 2**30
FORMAT_EXTENSIONS = {"onnx": "onnx", "xgboost-json": "json", "safetensors": "safetensors"}


def safe_member_file(model, *, n_features: int, n_classes: int) -> tuple[str, bytes]:
    """``(format, bytes)`` of one fitted member in an upload format: XGBoost → "xgboost-json", a torch
    zoo network → "safetensors", a kernel student and other scikit-learn models → "onnx".

    A model wrapped in :class:`~workers.learners.AlignedClassifier` is exported through its inner
    estimator, which must have seen every class (else the file could not name the classes).
    """
    from workers.algorithms.kernel_distillation import KernelDistilledClassifier
    from workers.algorithms.kernel_onnx import kernel_student_onnx
    from workers.modelio.export import export_sklearn_onnx, export_torch_safetensors, export_xgboost_json

    inner = getattr(model, "estimator_", model)
    present = getattr(model, "present_classes_", None)
    if inner is None or (present is not None and len(present) != n_classes):
        raise ValueError(f"A member trained on classes {list(present)} of {n_classes} cannot be saved on its own; "
                         "save the ensemble without it or retrain it on every class.")
    if isinstance(inner, KernelDistilledClassifier):
        return "onnx", kernel_student_onnx(inner, n_features)
    if type(inner).__name__ == "XGBClassifier":
        return "xgboost-json", export_xgboost_json(inner)
    if hasattr(inner, "module_"):
        return "safetensors", export_torch_safetensors(inner.module_, inner.spec_)
    return "onnx", export_sklearn_onnx(inner, n_features)


def bundle_write(files, *, weights, n_classes: int, n_features: int) -> bytes:
    """The bundle zip of ``files`` (``[(format, bytes)]``) with one weight each."""
    if len(files) != len(weights) or not files:
        raise ValueError("A bundle needs at least one member file and one weight per file.")
    members = [{"file": f"member_{index:04d}.{FORMAT_EXTENSIONS[model_format]}", "format": model_format,
                "weight": float(weight)} for index, ((model_format, _), weight) in enumerate(zip(files, weights))]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps({"n_classes": int(n_classes), "n_features": int(n_features),
                                                      "members": members}, indent=1))
        for member, (_, data) in zip(members, files):
            archive.writestr(member["file"], data)
    return buffer.getvalue()


def bundle_read(data: bytes) -> tuple[dict, list[bytes]]:
    """``(manifest, member file bytes in manifest order)``; ValueError with the reason otherwise."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ValueError("The bundle is not a zip archive.") from None
    with archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
        if sum(sizes.values()) > MAX_BUNDLE_BYTES or any(size > MAX_MEMBER_BYTES for size in sizes.values()):
            raise ValueError("The bundle's files are larger than a bundle may hold.")
        if "manifest.json" not in sizes:
            raise ValueError("The bundle has no manifest.json.")
        manifest = json.loads(archive.read("manifest.json"))
        members = _checked_members(manifest, sizes)
        return manifest, [archive.read(member["file"]) for member in members]


def _checked_members(manifest, sizes: dict) -> list[dict]:
    members = manifest.get("members") if isinstance(manifest, dict) else None
    if not isinstance(members, list) or not 1 <= len(members) <= MAX_BUNDLE_MEMBERS:
        raise ValueError(f"The manifest must list 1 to {MAX_BUNDLE_MEMBERS} members.")
    for key in ("n_classes", "n_features"):
        if not isinstance(manifest.get(key), int) or manifest[key] < 1:
            raise ValueError(f"The manifest's {key} must be a positive integer.")
    for member in members:
        if not isinstance(member, dict) or member.get("file") not in sizes or member["file"] == "manifest.json":
            raise ValueError(f"The manifest names a member file the bundle does not hold: {member!r}.")
        if member.get("format") not in FORMAT_EXTENSIONS:
            raise ValueError(f"Member {member['file']} has format {member.get('format')!r}; "
                             f"allowed: {', '.join(FORMAT_EXTENSIONS)}.")
        if member.get("feature_view", "one_hot") not in ("one_hot", "ordinal"):
            raise ValueError(f"Member {member['file']} reads feature view {member.get('feature_view')!r}; "
                             "allowed: one_hot, ordinal.")
        weight = member.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not np.isfinite(weight) or weight < 0:
            raise ValueError(f"Member {member['file']} has weight {weight!r}; weights are non-negative numbers.")
    if sum(member["weight"] for member in members) <= 0:
        raise ValueError("The members' weights are all zero.")
    return members


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
        self.member_views_ = [member.get("feature_view", "one_hot") for member in self.manifest_["members"]]
        self.feature_spec_ = self.feature_spec or self.manifest_.get("feature_spec")
        if any(view != "one_hot" for view in self.member_views_) and not isinstance(self.feature_spec_, dict):
            raise ValueError("Members of this bundle read the ordinal view of the features; give the federation's "
                             "feature specification (BundleClassifier(bundle, feature_spec=...)) to convert the "
                             "one-hot rows for them.")
        return self

    def _member_outcomes(self, features: np.ndarray) -> list:
        """Each member's sandbox outcome on ``features`` (one-hot) in its own view, in manifest order."""
        from workers.features import features_in_view
        from workers.modelio import SandboxLimits, predict_in_sandbox

        outcomes = [None] * len(self.member_files_)
        for view in sorted(set(self.member_views_)):
            positions = [index for index, member_view in enumerate(self.member_views_) if member_view == view]
            in_view = features if view == "one_hot" else features_in_view(features, self.feature_spec_, view)
            predicted = predict_in_sandbox([self.member_files_[index] for index in positions],
                                           np.asarray(in_view, dtype=np.float32), n_classes=len(self.classes_),
                                           limits=self.limits or SandboxLimits())
            for index, outcome in zip(positions, predicted):
                outcomes[index] = outcome
        return outcomes

    def predict_proba(self, X) -> np.ndarray:
        features = np.asarray(X, dtype=np.float32)
        outcomes = self._member_outcomes(features)
        failed = [f"{member['file']}: {outcome.error}" for member, outcome in
                  zip(self.manifest_["members"], outcomes) if outcome.error]
        if failed:
            raise ValueError("Members of the bundle could not predict: " + "; ".join(failed))
        weights = np.array([member["weight"] for member in self.manifest_["members"]], dtype=np.float64)
        stacked = np.stack([outcome.probabilities for outcome in outcomes])
        return np.tensordot(weights / weights.sum(), stacked, axes=1)

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.predict_proba(X), axis=1)
