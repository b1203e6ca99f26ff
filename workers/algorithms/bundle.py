"""A global model that is an ensemble, saved as a *bundle* (the one format: :mod:`workers.modelio.bundle`): a
zip of its members' safe-format files and a ``manifest.json`` ``{"n_classes", "n_features", "members":
[{"file", "format", "weight", "feature_view"}]}`` (Guha et al., *One-Shot Federated Learning*, section 3: the
ensemble is the model). A member's optional ``feature_view`` (:mod:`workers.features`: ``one_hot``, the
default, or ``ordinal``) is the view of the federation's features it reads; the bundle itself reads the one-hot view
(``n_features`` wide), and :class:`BundleClassifier` hands each member its own view, converted with the
federation's feature specification (the manifest's ``feature_spec``, or the one given to the classifier).

Reading a bundle never runs a member: :func:`bundle_read` only checks the archive (names, sizes,
manifest). :func:`stored_ensemble_probabilities`, the one predictor of stored members (the market's
predictions for buyers use it too), hands the member files to :func:`workers.modelio.predict_in_sandbox`
(resource-limited child processes, after the same structural checks as an upload) and averages with
the weights (:func:`workers.algorithms.ensemble.average_probabilities`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from workers.algorithms.ensemble import average_probabilities
from workers.features import ONE_HOT_VIEW, features_in_view
from workers.modelio.bundle import bundle_read
from workers.modelio.sandbox import SandboxConfiguration, SandboxOutcome

#: The family a global model that is a bundle of its members is recorded with (``GlobalModel.family``).
BUNDLE_FAMILY = "ensemble"
#: Runs model files on rows in the sandbox: ``predict(files, features, n_classes=...)``, as
#: :meth:`workers.modelio.SandboxConfiguration.predict` (the market's is configured from its settings).
SandboxPredict = Callable[..., list[SandboxOutcome]]


class MembersFailed(ValueError):
    """Members of a stored ensemble could not predict: ``errors`` are ``(position, sentence)`` pairs."""

    def __init__(self, errors: list[tuple[int, str]]):
        super().__init__("; ".join(f"member {position}: {error}" for position, error in errors))
        self.errors = errors


def stored_ensemble_probabilities(
    member_files: Sequence[bytes],
    *,
    weights: Sequence[float],
    views: Sequence[str],
    features: np.ndarray,
    n_classes: int,
    feature_spec: dict | None,
    predict: SandboxPredict,
) -> np.ndarray:
    """The weighted average (:func:`~workers.algorithms.ensemble.average_probabilities`) of stored member files'
    probabilities ``(n_rows, n_classes)``, each member run by ``predict`` (in the sandbox) on ``features`` (the
    one-hot view) converted to the view it reads with ``feature_spec``. The one ensemble predictor of stored
    models: a bundle's :class:`BundleClassifier` and the market's predictions for buyers use it.

    Raises :class:`MembersFailed` naming every member that could not predict, a ``ValueError`` when a member
    reads another view than one-hot and ``feature_spec`` is ``None``.
    """
    outcomes: list = [None] * len(member_files)
    for view in sorted(set(views)):
        positions = [position for position, member_view in enumerate(views) if member_view == view]
        if view != ONE_HOT_VIEW and feature_spec is None:
            raise ValueError(
                f"Members read the {view} view; the federation's feature specification converts the rows."
            )
        in_view = (
            features if feature_spec is None else features_in_view(features, feature_spec, view)
        )
        predicted = predict(
            [member_files[position] for position in positions],
            np.asarray(in_view, dtype=np.float32),
            n_classes=n_classes,
        )
        for position, outcome in zip(positions, predicted):
            outcomes[position] = outcome
    failed = [
        (position, outcome.error) for position, outcome in enumerate(outcomes) if outcome.error
    ]
    if failed:
        raise MembersFailed(failed)
    stacked = np.stack([outcome.probabilities for outcome in outcomes])
    return average_probabilities(stacked, weights=weights)


class BundleClassifier(ClassifierMixin, BaseEstimator):
    """A saved ensemble as a scikit-learn classifier that runs every member in the sandbox.

    Parameters
    ----------
    bundle : bytes
        A bundle zip (:func:`bundle_write`).
    sandbox : workers.modelio.SandboxConfiguration or None
        The sandbox the members run in: its children's limits and the caps on a member's structure (the
        defaults when ``None``; a deployment passes its own, ``market.sandbox.sandbox_configuration()``).
    feature_spec : dict or None
        The federation's feature specification (:func:`workers.features.infer_feature_spec`), needed when a
        member reads the ordinal view and the manifest holds no ``feature_spec``. ``X`` is always the one-hot
        view; each member gets its own.
    """

    def __init__(self, bundle: bytes = b"", sandbox=None, feature_spec=None):
        self.bundle = bundle
        self.sandbox = sandbox
        self.feature_spec = feature_spec

    def fit(self, X=None, y=None):
        self.manifest_, self.members_ = bundle_read(self.bundle)
        self.classes_ = np.arange(self.manifest_["n_classes"])
        self.n_features_in_ = self.manifest_["n_features"]
        self.feature_spec_ = self.feature_spec or self.manifest_.get("feature_spec")
        if any(member.feature_view != ONE_HOT_VIEW for member in self.members_) and not isinstance(
            self.feature_spec_, dict
        ):
            raise ValueError(
                "Members of this bundle read the ordinal view of the features; give the federation's "
                "feature specification (BundleClassifier(bundle, feature_spec=...)) to convert the "
                "one-hot rows for them."
            )
        return self

    def predict_proba(self, X) -> np.ndarray:
        try:
            return stored_ensemble_probabilities(
                [member.data for member in self.members_],
                weights=[member.weight for member in self.members_],
                views=[member.feature_view for member in self.members_],
                features=np.asarray(X, dtype=np.float32),
                n_classes=len(self.classes_),
                feature_spec=self.feature_spec_,
                predict=(self.sandbox or SandboxConfiguration()).predict,
            )
        except MembersFailed as failure:
            failed = [
                f"{self.manifest_['members'][position]['file']}: {error}"
                for position, error in failure.errors
            ]
            raise ValueError(
                "Members of the bundle could not predict: " + "; ".join(failed)
            ) from None

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.predict_proba(X), axis=1)
