"""A silo's side of training, on its own machine: on its table read and encoded (:mod:`workers.silo.table`), run
FedKT's party side (or train one local model), score it on held-out local rows, and describe the result for the
market.

FedKT: Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting*, Algorithm 1
lines 1-9 (:func:`workers.algorithms.fedkt.party_fit`); at L2 the party adds noise to its teachers'
votes and declares the data-independent example-level ε of
:func:`workers.privacy.accounting.party_noise_privacy_bound`.

Everything here raises :class:`workers.silo.errors.DataError` with a sentence for the silo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from workers.features import (
    features_in_view,
)
from workers.metrics import majority_comparison
from workers.modelio.families import NETWORK_FAMILIES, feature_view_for
from workers.silo.defaults import (
    DEFAULT_OWN_MODEL,
    DEFAULT_PARTITIONS,
    DEFAULT_STUDENT,
    DEFAULT_TEACHER,
    DEFAULT_TEACHERS,
    MIN_ROWS_PER_TEACHER,
    MIN_TRAINING_ROWS,
)
from workers.silo.errors import DataError
from workers.silo.table import EncodedData, encode_silo_table, validation_split


@dataclass(frozen=True)
class TrainingSettings:
    """What ``train`` was asked to do. ``privacy_level`` L0/L1 add no party noise; L2 adds Laplace
    (``gamma``) or Gaussian (``sigma``) noise to the teachers' votes on ``queries`` public rows, or, for
    one local network (``--local``), trains it with DP-SGD (``noise_multiplier`` or ``target_epsilon``,
    ``max_grad_norm``, ``delta``; the batch size and epochs are the student's hyperparameters).
    ``partitions`` and ``teachers`` left ``None`` are chosen for the silo's rows (:func:`fedkt_design`);
    ``own_model`` is the learner of the silo's own model trained beside the FedKT students, ``None`` for none
    (the federation does not accept own models, or the level is not L0: the own model has no noise).
    ``disjoint_partitions``: fit each of the s students directly on its own disjoint part of the training rows
    (:func:`workers.algorithms.fedkt.disjoint_partition_students`, the ``student`` learner, no teachers) and
    declare it, for a record-level L1 job (one record then moves one student's vote); L0 and L1 only."""

    partitions: int | None = None
    teachers: int | None = None
    teacher: dict = field(default_factory=lambda: dict(DEFAULT_TEACHER))
    student: dict = field(default_factory=lambda: dict(DEFAULT_STUDENT))
    own_model: dict | None = field(default_factory=lambda: dict(DEFAULT_OWN_MODEL))
    privacy_level: str = "L0"
    gamma: float | None = None
    sigma: float | None = None
    delta: float = 1e-5
    queries: int | float = 1.0
    validation_fraction: float = 0.2
    min_rows_per_teacher: int = MIN_ROWS_PER_TEACHER
    seed: int = 0
    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    max_grad_norm: float = 1.0
    disjoint_partitions: bool = False

    def feature_view(self, *, local: bool = False) -> str:
        """The view of the federation's features the models read: ordinal when every model trained (the
        students and teachers, or the one local model) is a tree family, else one-hot (workers.features)."""
        learners = (
            (self.student,)
            if local
            else (self.teacher, self.student, *((self.own_model,) if self.own_model else ()))
        )
        return feature_view_for(*(learner.get("family", "") for learner in learners))


@dataclass(frozen=True)
class TrainingResult:
    """Fitted models plus the metadata the market asks for with an upload."""

    models: tuple
    metadata: dict


def check_enough_rows(
    n_rows: int, *, partitions: int, teachers: int, min_rows_per_teacher: int
) -> None:
    """Refuse data too small for ``teachers`` disjoint subsets of ``min_rows_per_teacher`` rows (a single teacher
    needs :data:`MIN_TRAINING_ROWS` at least), naming the option that helps."""
    if teachers == 1 and n_rows >= min(min_rows_per_teacher, MIN_TRAINING_ROWS):
        return
    needed = teachers * min_rows_per_teacher
    if n_rows >= needed:
        return
    most = n_rows // min_rows_per_teacher
    if most >= 1:
        advice = (
            f"Lower --teachers to {most} (the most your rows allow), or leave --teachers out and `train` "
            "chooses t for your rows."
        )
    elif teachers > 1:
        advice = "Give --teachers 1 (one teacher on all your rows), or leave --teachers out."
    else:
        advice = too_few_rows_advice(n_rows)
    raise DataError(
        f"{n_rows} training rows are too few for s = {partitions} partitions × t = {teachers} "
        f"teachers: each partition splits the rows into {teachers} disjoint teacher subsets of at "
        f"least {min_rows_per_teacher} rows, so at least {needed} are needed. {advice}"
    )


def too_few_rows_advice(n_rows: int) -> str:
    return (
        f"A silo needs at least {MIN_TRAINING_ROWS} training rows to take part; add labelled rows, or hold "
        "fewer out with a lower --validation-fraction."
    )


def fedkt_design(n_rows: int, settings: TrainingSettings) -> tuple[int, int]:
    """FedKT's ``(s, t)`` for ``n_rows`` training rows: what the silo chose, else t = the most teachers of
    :data:`MIN_ROWS_PER_TEACHER` rows each up to :data:`DEFAULT_TEACHERS` (at least 1), and s =
    :data:`DEFAULT_PARTITIONS`, or 1 with a single teacher (s partitions of one teacher on the same rows would
    be copies of one student voting s times). Refused, naming the option that helps, when the rows allow
    nothing (:func:`check_enough_rows`)."""
    if n_rows < MIN_TRAINING_ROWS and settings.teachers is None:
        raise DataError(f"{n_rows} training rows are too few. {too_few_rows_advice(n_rows)}")
    teachers = settings.teachers or max(
        1, min(DEFAULT_TEACHERS, n_rows // settings.min_rows_per_teacher)
    )
    partitions = settings.partitions or (DEFAULT_PARTITIONS if teachers > 1 else 1)
    check_enough_rows(
        n_rows,
        partitions=partitions,
        teachers=teachers,
        min_rows_per_teacher=settings.min_rows_per_teacher,
    )
    return partitions, teachers


def party_noise(settings: TrainingSettings):
    """The L2 noise mechanism, or ``None`` at L0/L1."""
    from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise

    if settings.privacy_level != "L2":
        return None
    if (settings.gamma is None) == (settings.sigma is None):
        raise DataError(
            "At L2 give exactly one noise parameter: --gamma (Laplace) or --sigma (Gaussian)."
        )
    try:
        return (
            LaplaceNoise(gamma=settings.gamma)
            if settings.gamma is not None
            else GaussianNoise(sigma=settings.sigma)
        )
    except ValueError as error:
        raise DataError(str(error)) from error


def resolved_queries(queries: int | float, n_public: int) -> int:
    """Public rows labelled per partition: a count, or ``ceil(fraction · n_public)``."""
    count = int(np.ceil(queries * n_public)) if isinstance(queries, float) else int(queries)
    if not 1 <= count <= n_public:
        raise DataError(
            f"Cannot query {count} of the {n_public} public rows; give a count between 1 and "
            f"{n_public} or a fraction in (0, 1]."
        )
    return count


def privacy_declaration(
    settings: TrainingSettings, n_public: int
) -> tuple[dict, float | None, dict | None]:
    """``(privacy_parameters, declared ε, report)`` of an L2 run; empty at L0/L1."""
    from workers.privacy.accounting import party_noise_privacy_bound

    mechanism = party_noise(settings)
    if mechanism is None:
        return {}, None, None
    queries = resolved_queries(settings.queries, n_public)
    report = party_noise_privacy_bound(
        mechanism=mechanism,
        n_queries=queries,
        partitions=settings.partitions,
        teachers=settings.teachers,
        delta=settings.delta,
    )
    parameters = {
        **{name: value for name, value in mechanism.parameters.items() if value is not None},
        "delta": settings.delta,
        "partitions": settings.partitions,
        "teachers": settings.teachers,
        "queries": queries,
    }
    return parameters, report.epsilon, report.as_dict()


def accuracy(model, features: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.asarray(model.predict(features)) == labels)) if len(labels) else 0.0


def held_out_comparison(
    model, data: EncodedData, train: np.ndarray, held_out: np.ndarray, *, n_classes: int
) -> dict | None:
    """The model's accuracy and balanced accuracy on the held-out rows next to always answering the training
    rows' most frequent class (:func:`workers.metrics.majority_comparison`), as a dict; None with no held-out row."""
    comparison = majority_comparison(
        np.asarray(model.predict(data.features[held_out])) if len(held_out) else [],
        data.labels[held_out],
        data.labels[train],
        n_classes=n_classes,
    )
    return comparison.as_dict() if comparison else None


def fedkt_party_train(
    data: EncodedData,
    public_features: np.ndarray,
    *,
    n_classes: int,
    settings: TrainingSettings,
    progress: Callable[[str], None] | None = None,
) -> TrainingResult:
    """What ``onefold train`` does on a silo's rows, in process: FedKT's party side on its training rows with the
    design its row count allows (:func:`fedkt_design`), the students scored on the held-out rows, and, unless
    ``settings.own_model`` is None, the silo's own model on the same training rows, scored on the same held-out
    rows. ``models`` are the students, then the own model (``metadata["own_model"]`` describes it). ``progress``
    is told each step as it ends (the command prints it)."""
    from workers.algorithms.fedkt import party_fit

    train, held_out = validation_split(data.labels, settings.validation_fraction, settings.seed)
    partitions, teachers = fedkt_design(len(train), settings)
    chosen = settings.partitions is None or settings.teachers is None
    settings = replace(settings, partitions=partitions, teachers=teachers)
    if settings.own_model and settings.privacy_level != "L0":
        raise DataError(
            f"The silo's own model is trained without noise, so it goes with L0 submissions only, not "
            f"{settings.privacy_level}; train without it (--no-own-model)."
        )
    parameters, epsilon, report = privacy_declaration(settings, len(public_features))
    query = parameters.get(
        "queries",
        settings.queries
        if isinstance(settings.queries, float)
        else resolved_queries(settings.queries, len(public_features)),
    )
    if settings.disjoint_partitions:
        students, queried = (
            disjoint_students(data, train, n_classes=n_classes, settings=settings),
            0,
        )
        settings = replace(settings, teachers=None)
    else:
        try:
            result = party_fit(
                data.features[train],
                data.labels[train],
                public_features,
                n_classes=n_classes,
                teacher=settings.teacher,
                student=settings.student,
                partitions=settings.partitions,
                teachers=settings.teachers,
                query=query,
                noise=party_noise(settings),
                seed=settings.seed,
                progress=progress,
            )
        except ValueError as error:
            raise DataError(f"FedKT's party side failed: {error}") from error
        students, queried = result.students, len(result.queried_indices)
    if progress and settings.own_model:
        progress(f"Training your own model ({settings.own_model.get('family', 'default')})...")
    comparisons = [
        held_out_comparison(student, data, train, held_out, n_classes=n_classes)
        for student in students
    ]
    scores = [comparison["accuracy"] if comparison else 0.0 for comparison in comparisons]
    own = (
        own_model_train(data, train, held_out, n_classes=n_classes, settings=settings)
        if settings.own_model
        else None
    )
    metadata = _metadata(data, train, n_classes, settings, score=float(np.mean(scores)))
    metadata.update(
        {
            "algorithm": "fedkt",
            "design_chosen_for_rows": chosen,
            "own_model": own[1] if own else None,
            "student_validation_scores": scores,
            "student_majority_comparisons": comparisons,
            "feature_view": settings.feature_view(),
            "queried_public_rows": int(queried),
            "disjoint_partitions": settings.disjoint_partitions,
            "privacy_parameters": parameters,
            "declared_epsilon": epsilon,
            "privacy_report": report,
        }
    )
    return TrainingResult((*students, *((own[0],) if own else ())), metadata)


def disjoint_students(
    data: EncodedData, train: np.ndarray, *, n_classes: int, settings: TrainingSettings
) -> tuple:
    """The s students of ``--disjoint-partitions``, each on its own disjoint part of the training rows (at least
    ``min_rows_per_teacher`` rows each); a DataError at L2, whose noise is on the teachers' votes."""
    from workers.algorithms.fedkt import disjoint_partition_students

    if settings.privacy_level == "L2":
        raise DataError(
            "--disjoint-partitions fits students directly on your rows, with no teachers' votes to add L2 noise "
            "to; use it at L0 or L1 (a record-level L1 job adds the noise at the server)."
        )
    check_enough_rows(
        len(train),
        partitions=1,
        teachers=settings.partitions or 1,
        min_rows_per_teacher=settings.min_rows_per_teacher,
    )
    return disjoint_partition_students(
        data.features[train],
        data.labels[train],
        n_classes=n_classes,
        learner=settings.student,
        partitions=settings.partitions or 1,
        seed=settings.seed,
    )


def silo_train(
    frame: pd.DataFrame,
    spec: dict,
    public_features: np.ndarray,
    *,
    label_column: str,
    class_labels: list[str],
    settings: TrainingSettings = TrainingSettings(),  # noqa: B008 (frozen: the toolkit's defaults)
    progress: Callable[[str], None] | None = None,
) -> tuple[TrainingResult, EncodedData]:
    """``onefold train`` (FedKT) in process, from a silo's table: its rows encoded with the federation's ``spec``
    in the view its models read, the one-hot ``public_features`` (what ``pull`` downloads) in the same view, then
    :func:`fedkt_party_train` (students and, with the default settings, the silo's own model). Returns the result
    and the encoded rows."""
    view = settings.feature_view()
    data = encode_silo_table(
        frame, spec, label_column=label_column, class_labels=class_labels, view=view
    )
    result = fedkt_party_train(
        data,
        features_in_view(public_features, spec, view),
        n_classes=len(class_labels),
        settings=settings,
        progress=progress,
    )
    return result, data


def own_model_train(
    data: EncodedData,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    n_classes: int,
    settings: TrainingSettings,
) -> tuple[object, dict]:
    """The silo's own model (``settings.own_model``) on its training rows, and ``{"learner", "validation_score"}``
    with its accuracy on the held-out rows: the silo's best model, which never votes in FedKT."""
    from workers.learners import fit_aligned

    try:
        model = fit_aligned(
            settings.own_model,
            data.features[train],
            data.labels[train],
            n_classes=n_classes,
            seed=settings.seed,
        )
    except ValueError as error:
        raise DataError(f"Training your own model failed: {error}") from error
    comparison = held_out_comparison(model, data, train, held_out, n_classes=n_classes)
    return model, {
        "learner": dict(settings.own_model),
        "validation_score": comparison["accuracy"] if comparison else 0.0,
        "majority_comparison": comparison,
    }


def local_train(
    data: EncodedData,
    *,
    n_classes: int,
    settings: TrainingSettings,
    progress: Callable[[str], None] | None = None,
) -> TrainingResult:
    """One model on the silo's training rows (for ensembles); scored on the held-out rows. ``progress`` is told
    each step as it begins (the command prints it)."""
    from workers.learners import fit_aligned

    report = progress or (lambda message: None)
    train, held_out = validation_split(data.labels, settings.validation_fraction, settings.seed)
    check_enough_rows(
        len(train), partitions=1, teachers=1, min_rows_per_teacher=settings.min_rows_per_teacher
    )
    learner = dp_sgd_learner(settings) if settings.privacy_level == "L2" else settings.student
    if settings.privacy_level == "L2" and len(np.unique(data.labels[train])) < 2:
        raise DataError(
            "DP-SGD needs rows of at least two classes: a model of one class would tell which class "
            "all your rows have."
        )
    report(
        f"Fitting {'a DP-SGD network' if settings.privacy_level == 'L2' else settings.student.get('family', 'the model')}"
        f" on {len(train)} rows ({len(held_out)} held out to score it)..."
    )
    try:
        model = fit_aligned(
            learner,
            data.features[train],
            data.labels[train],
            n_classes=n_classes,
            seed=settings.seed,
        )
    except ValueError as error:
        raise DataError(f"Training the local model failed: {error}") from error
    report(f"Scoring the model on the {len(held_out)} held-out rows...")
    comparison = held_out_comparison(model, data, train, held_out, n_classes=n_classes)
    metadata = _metadata(
        data, train, n_classes, settings, score=comparison["accuracy"] if comparison else 0.0
    )
    metadata.update(
        {
            "algorithm": "local",
            "majority_comparison": comparison,
            "feature_view": settings.feature_view(local=True),
            "privacy_parameters": {},
            "declared_epsilon": None,
            "privacy_report": None,
        }
    )
    if settings.privacy_level == "L2":
        trained = model.estimator_
        metadata.update(
            {
                "algorithm": "local_dp_sgd",
                "privacy_parameters": trained.privacy_.as_declaration(),
                "declared_epsilon": trained.privacy_report_.epsilon,
                "privacy_report": trained.privacy_report_.as_dict(),
            }
        )
    return TrainingResult((model,), metadata)


def dp_sgd_learner(settings: TrainingSettings):
    """The student network (``mlp`` or ``cnn``, with its family's and the silo's hyperparameters) trained with
    DP-SGD through Opacus (:class:`workers.algorithms.dp_sgd.DpSgdClassifier`)."""
    from workers.algorithms.dp_sgd import DpSgdClassifier
    from workers.learners.registry import make_learner

    family = settings.student.get("family")
    if family not in NETWORK_FAMILIES:
        raise DataError(
            f"At L2 a local model is a network trained with DP-SGD: use --student mlp or --student cnn, "
            f"not {family}."
        )
    if (settings.noise_multiplier is None) == (settings.target_epsilon is None):
        raise DataError("DP-SGD takes exactly one of --noise-multiplier and --target-epsilon.")
    architecture = {
        name: value
        for name, value in make_learner({"family": family}).get_params().items()
        if name in ("architecture", "hidden_sizes", "image_shape", "conv_channels", "kernel_size")
    }
    chosen = {name: value for name, value in settings.student.items() if name != "family"}
    try:
        return DpSgdClassifier(
            **{**architecture, **chosen},
            noise_multiplier=settings.noise_multiplier,
            target_epsilon=settings.target_epsilon,
            max_grad_norm=settings.max_grad_norm,
            delta=settings.delta,
        )
    except TypeError as error:
        raise DataError(
            f"The DP-SGD network does not take these hyperparameters: {error}"
        ) from None


def _metadata(
    data: EncodedData,
    train: np.ndarray,
    n_classes: int,
    settings: TrainingSettings,
    *,
    score: float,
) -> dict:
    return {
        "n_local_examples": int(len(train)),
        "n_validation_rows": int(len(data.labels) - len(train)),
        "local_validation_score": score,
        "privacy_level": settings.privacy_level,
        "label_distribution": np.bincount(data.labels[train], minlength=n_classes)
        .astype(int)
        .tolist(),
        "partitions": settings.partitions,
        "teachers": settings.teachers,
        "teacher": settings.teacher,
        "student": settings.student,
        "seed": settings.seed,
        "encoding": data.report,
    }


def per_label_logits(model, features: np.ndarray, labels: np.ndarray, *, n_classes: int) -> dict:
    """Federated distillation's upload (Jeong et al., *Federated Distillation and Augmentation*, FD,
    Algorithm 1; :func:`workers.algorithms.fd.local_label_logits`): for each label ℓ, the mean logit
    vector the model gives the silo's rows of label ℓ, K × K numbers whatever the model's size.
    Logits are log-probabilities (models without raw logits); ``present[ℓ]`` is False (and the row
    zeros) for a label the silo does not hold."""
    from workers.algorithms.fd import local_label_logits

    log_probabilities = np.log(np.clip(model.predict_proba(features), 1e-12, None))
    logits, present = local_label_logits(log_probabilities, labels, n_classes)
    return {"per_label_logits": logits.tolist(), "present": present.tolist()}


__all__ = [
    "DEFAULT_OWN_MODEL",
    "DEFAULT_PARTITIONS",
    "DEFAULT_STUDENT",
    "DEFAULT_TEACHER",
    "DEFAULT_TEACHERS",
    "MIN_TRAINING_ROWS",
    "MIN_ROWS_PER_TEACHER",
    "TrainingResult",
    "TrainingSettings",
    "accuracy",
    "check_enough_rows",
    "fedkt_design",
    "held_out_comparison",
    "fedkt_party_train",
    "own_model_train",
    "local_train",
    "per_label_logits",
    "privacy_declaration",
    "dp_sgd_learner",
    "resolved_queries",
    "silo_train",
]
