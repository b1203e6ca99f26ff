"""The chord's callback, first half: sum the chunks' signals, add L1 noise once (stored, replayed on retry), fuse
through the registry (:class:`FusedJob`), then export the global model and evaluate the exported portable
file in the sandbox (:class:`EvaluatedModel`). Nothing here writes the global model: :mod:`.finalize` does.

Nothing derived from the votes leaves the worker here either: the lines that report on the fusion (rows trained
on, classes nobody labelled, the fusion auto chose, the accuracy) are held in ``report_lines`` and written by the
release step (:func:`market.jobs.services.job_release`), so that a job failing before it is refunded (issue 45)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from market.feature_views import stored_features_in_view
from market.jobs.lifecycle import job_noise_stored
from market.jobs.selectors import (
    job_best_model_files,
    job_cancel_requested,
    job_chunks_in_order,
    job_members,
    server_noise_used,
    submissions_with_model_files,
)
from market.jobs.services import job_log
from market.sandbox import stored_models_convert, stored_models_predict
from market.storage import (
    arrays_from_npz,
    arrays_from_npz_cached,
    arrays_to_npz,
    artifact_read,
    artifact_save,
)
from workers.algorithms import algorithm_get
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.bundle import BUNDLE_FAMILY
from workers.algorithms.ensemble import average_probabilities
from workers.algorithms.operator_baseline import OPERATOR_ONLY_VIEW, operator_only_baseline
from workers.algorithms.registry import Fusion
from workers.algorithms.schema import fitted_feature_view
from workers.features import ONE_HOT_VIEW
from workers.jobs.chunks import ChunkSignals, chunk_signals_from_npz
from workers.jobs.export import export_global_model_while, model_family_of
from workers.jobs.interruptible import fuse_in_child
from workers.metrics import classification_metrics
from workers.modelio.artifact import ExportedFile, bundle_exported_file
from workers.modelio.base import ArtifactFormat
from workers.modelio.bundle import BundleMember, bundle_write
from workers.privacy.mechanisms import ConfidentGaussianNoise, GaussianNoise, LaplaceNoise
from workers.privacy.settings import PrivacySettings
from workers.runner.lifecycle import JobInputError

# Row types for annotations only: rows reach the runner through market.jobs' selectors and services.
if TYPE_CHECKING:
    from market.jobs.models import Job, JobEstimate
    from market.submissions.models import Submission


@dataclass(frozen=True)
class FusedJob:
    """A job's members fused into a global model, before anything is exported or saved.

    ``submission_ids`` are the members in the chunks' order, ``submissions`` those rows by id (their model files
    prefetched); ``feature_view`` is the view the global model reads (the one-hot view for an ensemble bundle,
    whose members each read their own)."""

    fusion: Fusion
    submission_ids: tuple[int, ...]
    submissions: Mapping[int, Submission]
    feature_view: str
    report_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvaluatedModel:
    """The global model's files as a buyer downloads them, and how it scored on the evaluation split.

    ``metrics`` are :func:`workers.metrics.classification_metrics` of the rows the job reports on and
    ``report_predictions`` its classes of those rows (compared row by row with each baseline's); ``family`` is
    the model family (:data:`~workers.algorithms.bundle.BUNDLE_FAMILY` for a bundle); ``verification`` compares the portable file with the fitted model
    (empty for a bundle); ``report_lines`` what the release step writes to the job's log."""

    files: tuple[ExportedFile, ...]
    metrics: dict
    family: str
    verification: dict
    report_predictions: np.ndarray
    report_lines: tuple[str, ...] = ()


def job_chunk_signals(job: Job) -> Iterator[ChunkSignals]:
    """The stored signals of each chunk of ``job`` in order; JobInputError if one is missing or corrupt."""
    for chunk in job_chunks_in_order(job=job):
        try:
            yield chunk_signals_from_npz(artifact_read(chunk.artifact_name))
        except (FileNotFoundError, ValueError, OSError) as error:
            raise JobInputError(
                f"The partial results of chunk {chunk.index + 1} are missing or corrupt."
            ) from error


@dataclass(frozen=True)
class JobNoise:
    """An L1 job's server noise as its fusion child draws it (``fuse_in_child``): the mechanism (None below L1),
    the answers an earlier attempt drew (replayed, never drawn again) and how a fresh draw is stored."""

    mechanism: LaplaceNoise | GaussianNoise | ConfidentGaussianNoise | None = None
    stored: np.ndarray | None = None
    on_drawn: Callable[[np.ndarray], None] | None = None


def job_noise(job: Job) -> JobNoise:
    """The noise of ``job``'s fusion (no mechanism below L1)."""
    if not server_noise_used(privacy_level=job.privacy_level):
        return JobNoise()
    # The settings the job stored when it was created (workers.privacy.settings); its pre-flight estimate
    # (workers.runner.preflight) simulates the same mechanism.
    mechanism = PrivacySettings.of(job.parameters["privacy"]).noise()
    stored = (
        arrays_from_npz(job.noisy_answers_name)["noisy_counts"] if job.noisy_answers_name else None
    )

    def store(
        noisy: np.ndarray,
    ) -> None:  # committed before the answers are used: they are spent from now on
        name = artifact_save(
            name=f"jobs/{job.id}/noisy-answers.npz",
            data=arrays_to_npz(noisy_counts=noisy),
            stored_names=[],
        )
        job_noise_stored(job=job, name=name)

    if stored is not None:
        job_log(job_id=job.id, message="Reusing the noisy answers drawn by an earlier attempt.")
    return JobNoise(mechanism=mechanism, stored=stored, on_drawn=store)


def _fusion_started(job: Job, pid: int) -> None:
    job_log(job_id=job.id, message=f"Fusing in a child process (pid {pid}) that a cancel stops.")


def job_fuse(job: Job) -> FusedJob | None:
    """Sum the chunks' signals and fuse them in a child process; None if the job was cancelled while fitting."""
    ids, signal_sum = [], None
    for chunk in job_chunk_signals(job):
        ids.extend(int(value) for value in chunk.member_ids)
        signal_sum = chunk.signal_sum if signal_sum is None else signal_sum + chunk.signal_sum
    submissions = submissions_with_model_files(submission_ids=ids)
    missing = [submission_id for submission_id in ids if submission_id not in submissions]
    if missing:
        raise JobInputError(f"Submission #{missing[0]} was deleted after the job was created.")
    members = job_members(
        submissions=[submissions[submission_id] for submission_id in ids],
        privacy_level=job.privacy_level,
    )
    settings = algorithm_get(job.kind).validate(job.parameters)
    view = fitted_feature_view(settings)
    public = stored_features_in_view(
        arrays_from_npz_cached(job.public_dataset.features_file)["features"],
        job.public_dataset,
        view,
    )

    evaluation = (
        _evaluation_rows(job, view) if algorithm_get(job.kind).reads_evaluation(settings) else None
    )
    noise = job_noise(job)
    try:
        fusion = fuse_in_child(
            kind=job.kind,
            signal_sum=signal_sum,
            public_features=public,
            members=members,
            n_classes=job.federation.n_classes,
            params=job.parameters,
            seed=job.seed,
            evaluation=evaluation,
            noise=noise.mechanism,
            stored_noise=noise.stored,
            on_noise_drawn=noise.on_drawn,
            cancelled=lambda: job_cancel_requested(job_id=job.id),
            on_start=lambda pid: _fusion_started(job, pid),
        )
    except ValueError as error:
        raise JobInputError(f"The fusion failed: {error}") from error
    if fusion is None:  # cancelled while fitting; the child is gone and job_finalize ends the job
        return None
    # an ensemble (also one that vote: auto chose) fits nothing: its bundle reads the one-hot view, each member its own
    return FusedJob(
        fusion=fusion,
        submission_ids=tuple(ids),
        submissions=submissions,
        feature_view=view if fusion.model is not None else ONE_HOT_VIEW,
        report_lines=fusion_logged(fusion, n_members=len(members)),
    )


def fusion_logged(fusion: Fusion, *, n_members: int) -> tuple[str, ...]:
    """The job log's lines on any kind's fusion: the members it fused, the public rows the model was trained on,
    and the classes no released label names (the kind's ``details["unlabelled_classes"]``, where it has any)."""
    lines = [
        f"Fused {n_members} member(s); the global model was trained on "
        f"{int(np.count_nonzero(fusion.trained))} public example(s)."
    ]
    if unlabelled := fusion.details.get("unlabelled_classes"):
        lines.append(
            f"No released label names class(es) {', '.join(map(str, unlabelled))}: the global model gives them "
            "a small probability only (query more public rows, or use less noise, to learn them)."
        )
    return tuple(lines)


def _evaluation_rows(job: Job, view: str) -> EvaluationRows:
    """The evaluation split in ``view``, every member's probabilities of it and every member's own signal of the
    public rows, in the members' order (FedKT's ``vote: auto`` chooses on one half of it, the stacked fusion is
    fitted on one half: workers.algorithms.auto_fusion, workers.algorithms.stack_fusion)."""
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    chunks = list(job_chunk_signals(job))
    return EvaluationRows(
        stored_features_in_view(evaluation["features"], job.public_dataset, view),
        evaluation["labels"],
        np.concatenate([chunk.evaluation_probabilities for chunk in chunks]),
        member_signals=np.concatenate([chunk.member_signals for chunk in chunks]),
    )


def evaluation_report_rows(job: Job | JobEstimate, labels: np.ndarray) -> np.ndarray:
    """The evaluation rows every job reports on, whatever its kind (issue 39: two jobs of one federation are
    compared on the same rows): the report half of :func:`~workers.algorithms.auto_fusion.evaluation_halves` of
    the job's seed, which no fit or choice reads (``auto``'s choice, a stack's fit and the operator-only baseline
    read the other half); every row of a split too small to halve."""
    if len(labels) < 2:
        return np.arange(len(labels))
    return evaluation_halves(labels, seed=job.seed)[1]


def job_operator_only_baseline(job: Job | JobEstimate) -> tuple[dict, np.ndarray] | None:
    """What the operator has without the silos, for a job or its pre-flight estimate: the operator-only model
    (:func:`workers.algorithms.operator_baseline.operator_only_baseline`) fitted on the half of the job's
    evaluation split that :func:`evaluation_report_rows` leaves out and scored on the report half (its scores and
    its classes of the report rows); None for a split too small to halve."""
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    labels = evaluation["labels"]
    if len(labels) < 2:
        return None
    fit_rows, report_rows = evaluation_halves(labels, seed=job.seed)
    features = stored_features_in_view(
        evaluation["features"], job.public_dataset, OPERATOR_ONLY_VIEW
    )
    return operator_only_baseline(
        features,
        labels,
        fit_rows=fit_rows,
        report_rows=report_rows,
        n_classes=job.federation.n_classes,
        seed=job.seed,
    )


def job_evaluate(job: Job, fused: FusedJob) -> EvaluatedModel:
    """Export the global model (a fitted model's portable file, run in the sandbox; or the bundle of the selected
    members) and score it on the evaluation split."""
    fusion, n_classes = fused.fusion, job.federation.n_classes
    evaluation = arrays_from_npz_cached(job.evaluation_split.data_file)
    features = stored_features_in_view(
        evaluation["features"], job.public_dataset, fused.feature_view
    )
    labels = evaluation["labels"]
    if fusion.model is not None:
        files, probabilities, verification = _exported(fusion.model, features, n_classes=n_classes)
        family = model_family_of(fusion.model)
    else:
        files, probabilities = _bundled(job, fused, one_hot_features=features)
        verification, family = {}, BUNDLE_FAMILY
    report = evaluation_report_rows(job, labels)
    metrics = classification_metrics(probabilities[report], labels[report], n_classes=n_classes)
    lines = [evaluation_logged(job.kind, fusion.details, report_rows=len(report))]
    lines.append(f"Global model accuracy on the evaluation split: {metrics['accuracy']:.4f}.")
    return EvaluatedModel(
        files=tuple(files),
        metrics=metrics,
        family=family,
        verification=verification,
        report_predictions=probabilities[report].argmax(axis=1),
        report_lines=(*fused.report_lines, *lines),
    )


def evaluation_logged(kind: str, details: Mapping, *, report_rows: int) -> str:
    """The job log's sentence on the rows the metrics are on: the kind's own (how its fusion read the evaluation
    split: chose, fitted, mixed), else the runner's (the ``report_rows`` rows of the report half)."""
    return algorithm_get(kind).report_sentence(details, report_rows=report_rows) or (
        f"Metrics below are on the report half of the evaluation split ({report_rows} rows, the rows every "
        "job of the federation reports on)."
    )


def _exported(
    model, features: np.ndarray, *, n_classes: int
) -> tuple[list[ExportedFile], np.ndarray, dict]:
    """A fitted global model's files, the portable file's probabilities of ``features`` (run in the sandbox, as a
    buyer's would be, while the native file is written: :func:`~workers.jobs.export.export_global_model_while`) and
    how far they are from the fitted model's own."""

    def sandbox_run(portable: ExportedFile):
        return stored_models_predict([portable.data], features, n_classes=n_classes)[0]

    try:
        files, outcome = export_global_model_while(
            model, n_features=features.shape[1], n_classes=n_classes, evaluate=sandbox_run
        )
    except ValueError as error:
        raise JobInputError(str(error)) from error
    if outcome.error:
        raise JobInputError(f"The exported global model could not be run: {outcome.error}")
    native = np.asarray(model.predict_proba(features))
    verification = {
        "portable_vs_native_max_abs_difference": float(
            np.max(np.abs(outcome.probabilities - native))
        )
    }
    return files, outcome.probabilities, verification


def _bundled(
    job: Job, fused: FusedJob, *, one_hot_features: np.ndarray
) -> tuple[list[ExportedFile], np.ndarray]:
    """The bundle of the members the fusion weighed (equal weights unless it chose some), each member that is not
    ONNX with its ONNX twin (:func:`_with_onnx_twins`), and its weighted probabilities of the evaluation split
    (``one_hot_features``; :func:`~workers.algorithms.ensemble.average_probabilities`, the one ensemble
    predictor), read chunk by chunk from the members' stored predictions."""
    weights = fused.fusion.details.get("weights") or {str(i): 1.0 for i in fused.submission_ids}
    total = sum(weights.get(str(i), 0.0) for i in fused.submission_ids)
    members: list[BundleMember] = []
    probabilities = 0.0
    for chunk in job_chunk_signals(job):
        chunk_weights = [weights.get(str(int(i)), 0.0) / total for i in chunk.member_ids]
        if any(chunk_weights):
            # A chunk at a time keeps memory flat in the number of members: each chunk's weighted mean times its
            # share of the weight (the shares add up to 1) sums to the weighted mean over every member.
            probabilities = probabilities + sum(chunk_weights) * average_probabilities(
                chunk.evaluation_probabilities, weights=chunk_weights
            )
        for member_id, weight in zip(chunk.member_ids, chunk_weights):
            if weight:  # a member the selection left out is not shipped to buyers
                members += _bundle_members(
                    fused.submissions[int(member_id)], weight=weight, job=job
                )
    bundle = bundle_write(
        _with_onnx_twins(job, members, one_hot_features),
        n_classes=job.federation.n_classes,
        n_features=one_hot_features.shape[1],
        feature_spec=job.public_dataset.feature_spec,
    )
    return [bundle_exported_file(bundle)], probabilities


def _with_onnx_twins(
    job: Job, members: list[BundleMember], one_hot_features: np.ndarray
) -> list[BundleMember]:
    """``members``, each one that is not ONNX with its ONNX twin, converted in the sandbox and checked there to
    predict the member's own probabilities of the evaluation split (:func:`market.sandbox.stored_models_convert`),
    so that a buyer runs the bundle with onnxruntime and numpy alone. A member whose twin is refused is shipped
    without one, and the job's log says why (its raw-column ONNX then says so too)."""
    unconverted = [
        index for index, member in enumerate(members) if member.format != ArtifactFormat.ONNX
    ]
    if not unconverted:
        return members
    outcomes = stored_models_convert(
        [members[index].data for index in unconverted],
        views=[members[index].feature_view for index in unconverted],
        one_hot_features=one_hot_features,
        feature_spec=job.public_dataset.feature_spec,
        n_classes=job.federation.n_classes,
    )
    twinned = list(members)
    for index, outcome in zip(unconverted, outcomes):
        if outcome.error:
            job_log(
                job_id=job.id,
                message=f"Bundle member {index + 1} ({members[index].format}) has no ONNX twin: {outcome.error}",
                level="warning",
            )
        else:
            twinned[index] = replace(members[index], onnx_twin=outcome.onnx)
    return twinned


def _bundle_members(submission: Submission, *, weight: float, job: Job) -> list[BundleMember]:
    """The submission's model files that make its best prediction (its silo's own model when the job uses it, else
    its students: workers.algorithms.registry.member_model_positions, the rule its ensemble signal followed) as
    bundle members that share its ``weight``; named by position in the bundle, since a submission id in a buyer's
    download would say whose model it is."""
    files = job_best_model_files(submission=submission, privacy_level=job.privacy_level)
    return [
        BundleMember(
            format=model_file.format,
            data=artifact_read(model_file.stored_name),
            weight=weight / max(1, len(files)),
            feature_view=(model_file.info or {}).get("feature_view", ONE_HOT_VIEW),
            # the federation classes of its output columns, as its validation read them (a member that never
            # saw a class has fewer columns): what a buyer needs to widen its output with numpy alone
            classes=tuple((model_file.info or {}).get("classes") or ()) or None,
        )
        for model_file in files
    ]
