"""The deployment's one configuration of the model sandbox (:class:`workers.modelio.SandboxConfiguration`),
built from settings by :func:`sandbox_configuration`: every place that runs stored or uploaded models
(submission validation, a job's chunks and its evaluation, a buyer's predictions of a single model or an
ensemble bundle's members) calls :func:`stored_models_predict`, so that each honours the same resource limits,
the same caps on a model's size and structure, and the same (tests-only) switch."""

from __future__ import annotations

import threading

import numpy as np
from django.conf import settings

from workers.features import features_in_view
from workers.modelio import ModelLimits, SandboxConfiguration, SandboxLimits, SandboxOutcome
from workers.modelio.session_pool import SessionPool, SessionPoolLimits


def model_limits() -> ModelLimits:
    """Caps on a model's size and structure (``ONEFOLD_MAX_UPLOAD_BYTES``, ``ONEFOLD_MODEL_MAX_*``)."""
    return ModelLimits(
        max_model_bytes=settings.ONEFOLD_MAX_UPLOAD_BYTES,
        max_trees=settings.ONEFOLD_MODEL_MAX_TREES,
        max_nodes_per_tree=settings.ONEFOLD_MODEL_MAX_TREE_NODES,
        max_depth=settings.ONEFOLD_MODEL_MAX_TREE_DEPTH,
        max_parameters=settings.ONEFOLD_MODEL_MAX_PARAMETERS,
    )


def sandbox_limits() -> SandboxLimits:
    """Resource limits of each sandbox child (``ONEFOLD_SANDBOX_*``)."""
    return SandboxLimits(
        memory_bytes=settings.ONEFOLD_SANDBOX_MEMORY_MB * 1024**2,
        cpu_seconds=settings.ONEFOLD_SANDBOX_CPU_SECONDS,
        wall_seconds=settings.ONEFOLD_SANDBOX_WALL_SECONDS,
    )


def sandbox_configuration() -> SandboxConfiguration:
    """The sandbox under this deployment's settings: :func:`sandbox_limits`, :func:`model_limits` and
    ``ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS``."""
    return SandboxConfiguration(
        limits=sandbox_limits(),
        model_limits=model_limits(),
        skip_structural_checks=settings.ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS,
    )


def stored_models_predict(
    models: list[bytes], features: np.ndarray, *, n_classes: int
) -> list[SandboxOutcome]:
    """Class probabilities ``(n_rows, n_classes)`` of each model on ``features``, or its error sentence, computed
    in sandbox children under this deployment's configuration (:func:`sandbox_configuration`)."""
    return sandbox_configuration().predict(models, features, n_classes=n_classes)


_session_pools: dict[tuple, SessionPool] = {}
_session_pools_lock = threading.Lock()


def prediction_session_pool() -> SessionPool:
    """This process's pool of warm sandbox sessions under this deployment's configuration and
    ``ONEFOLD_PREDICT_SESSION*`` settings (one per distinct configuration, so that a test's changed settings get
    their own)."""
    configuration = sandbox_configuration()
    pool_limits = SessionPoolLimits(
        max_sessions=settings.ONEFOLD_PREDICT_SESSIONS,
        max_calls=settings.ONEFOLD_PREDICT_SESSION_CALLS,
        idle_seconds=settings.ONEFOLD_PREDICT_SESSION_IDLE_SECONDS,
    )
    with _session_pools_lock:
        key = (configuration, pool_limits)
        if key not in _session_pools:
            # settings changed (tests do): the old configuration's sessions are not kept beside the new ones
            for stale in _session_pools.values():
                stale.close()
            _session_pools.clear()
            _session_pools[key] = SessionPool(configuration=configuration, pool_limits=pool_limits)
        return _session_pools[key]


def warm_models_predict(
    models: list[bytes], features: np.ndarray, *, n_classes: int
) -> list[SandboxOutcome]:
    """:func:`stored_models_predict` through warm sandbox sessions (:func:`prediction_session_pool`): the same
    limits, checks and outcomes, without starting a child per call. For buyers' predictions, where the same models
    are asked again and again."""
    return prediction_session_pool().predict(models, features, n_classes=n_classes)


def stored_models_convert(
    models: list[bytes],
    *,
    views: list[str],
    one_hot_features: np.ndarray,
    feature_spec: dict,
    n_classes: int,
) -> list[SandboxOutcome]:
    """Each model's ONNX twin (an ONNX model is its own), checked on the stored ``one_hot_features`` in the view
    the model reads, with the twin's probabilities of them; or the error sentence of a model that cannot be
    converted or whose twin does not predict its probabilities. Computed in sandbox children under this
    deployment's configuration (:meth:`SandboxConfiguration.convert_to_onnx`), one child per view."""
    outcomes: dict[int, SandboxOutcome] = {}
    for view in sorted(set(views)):
        indices = [index for index, model_view in enumerate(views) if model_view == view]
        converted = sandbox_configuration().convert_to_onnx(
            [models[index] for index in indices],
            features_in_view(one_hot_features, feature_spec, view),
            n_classes=n_classes,
        )
        outcomes.update(zip(indices, converted))
    return [outcomes[index] for index in range(len(models))]
