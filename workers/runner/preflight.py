"""The worker side of a pre-flight estimate (market.jobs.preflight): claim it, take the members' signals, fuse them
through the engine as the job would (:func:`workers.jobs.interruptible.fuse_in_child`) and score every fused model
on the evaluation split against the baselines (market.jobs.baselines). At L2 the signals are the members' own,
predicted as a job's chunks do (:func:`workers.runner.chunks.members_predicted`; they carry the silos' noise), fused
once. At L1 they are simulated votes (:func:`workers.jobs.preflight.simulated_member_predictions`) of a model
fitted on the operator's own rows, never the silos' votes, which no ε covers before the job (issue 38 item 3), fused once without
noise (the reference) and once per simulated draw of the job's noise; no silo baseline is measured.

Nothing here draws real DP noise, stores a noisy answer, charges a budget or writes a job or global model: the
estimate's row holds the scores and nothing else. The Celery task module (workers.tasks) calls
:func:`job_estimate_run`; a transient error releases the estimate (:func:`job_estimate_release`) for the retry.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from market.feature_views import stored_features_in_view
from market.jobs.baselines import baselines_measure
from market.jobs.parameters import L1_DEFAULT_SHARE_OF_LIMIT
from market.jobs.preflight import (
    job_estimate_claim,
    job_estimate_end,
    job_estimate_for_run,
    job_estimate_progress_record,
)
from market.jobs.preflight import job_estimate_release as estimate_release
from market.jobs.privacy_costs import member_budget_views
from market.jobs.selectors import job_members, server_noise_used, submissions_with_model_files
from market.storage import arrays_from_npz_cached
from market.transient import TRANSIENT_ERRORS
from workers.algorithms import algorithm_get
from workers.algorithms.auto_fusion import EvaluationRows, evaluation_halves
from workers.algorithms.ensemble import average_probabilities
from workers.algorithms.operator_baseline import OPERATOR_ONLY_LEARNER, OPERATOR_ONLY_VIEW
from workers.algorithms.operator_only import operator_only_fit
from workers.algorithms.schema import MIN_TRAINING_ROWS, fitted_feature_view, with_query_count
from workers.jobs.chunks import ChunkSignals, chunk_signals_of
from workers.jobs.interruptible import fuse_in_child
from workers.jobs.preflight import (
    draw_seeds,
    metric_spread,
    simulated_member_predictions,
    simulated_noise,
)
from workers.metrics import classification_metrics, headline
from workers.privacy.plans import advised_candidates, advised_query_counts, budgets_within_share
from workers.privacy.settings import PrivacySettings
from workers.runner.chunks import members_predicted
from workers.runner.fusing import evaluation_report_rows, job_operator_only_baseline
from workers.runner.leases import worker_id
from workers.runner.lifecycle import JobInputError

if TYPE_CHECKING:
    from market.jobs.models import JobEstimate

logger = logging.getLogger("workers.runner")


def job_estimate_release(*, estimate_id: int) -> None:
    """Hand this worker's running estimate back after a transient error (:func:`market.jobs.preflight.
    job_estimate_release`)."""
    estimate_release(estimate_id=estimate_id, worker=worker_id())


def job_estimate_run(*, estimate_id: int) -> None:
    """Claim the estimate and compute it; bad input or an unexpected error fails it with a readable reason, a
    transient error propagates (the task retries)."""
    if not job_estimate_claim(estimate_id=estimate_id, worker=worker_id()):
        return
    estimate = job_estimate_for_run(estimate_id=estimate_id)
    try:
        result = _estimate(estimate)
    except TRANSIENT_ERRORS:
        raise
    except JobInputError as error:
        job_estimate_end(estimate_id=estimate_id, reason=str(error))
    except (
        Exception
    ) as error:  # a bug or a crashed fusion: the operator reads why instead of a stuck estimate
        logger.exception("Pre-flight estimate #%s failed", estimate_id)
        job_estimate_end(
            estimate_id=estimate_id,
            reason=f"Internal error while estimating: {type(error).__name__}: {error}",
        )
    else:
        job_estimate_end(estimate_id=estimate_id, result=result)


def _progress(estimate: JobEstimate, *, stage: str, done: int, total: int) -> None:
    job_estimate_progress_record(estimate_id=estimate.id, stage=stage, done=done, total=total)


def _selected_ids(estimate: JobEstimate) -> list[int]:
    """The members the job would use, chosen by its engine from their declared metadata, as a job plans them."""
    found = submissions_with_model_files(submission_ids=estimate.submission_ids)
    missing = [id for id in estimate.submission_ids if id not in found]
    if missing:
        raise JobInputError(f"Submission #{missing[0]} was deleted after the estimate was asked.")
    submissions = [found[id] for id in estimate.submission_ids]
    try:
        selected = algorithm_get(estimate.kind).select(
            job_members(submissions=submissions, privacy_level=estimate.privacy_level),
            estimate.parameters,
            seed=estimate.seed,
        )
    except ValueError as error:
        raise JobInputError(f"The members could not be selected: {error}") from error
    return [submissions[index].id for index in selected]


def _predicted(estimate: JobEstimate, ids: list[int]):
    """Every member's signal and evaluation probabilities, a chunk's worth at a time (the progress counts them)."""
    size = max(1, int(settings.ONEFOLD_JOB_CHUNK_SIZE))
    chunks = []
    for start in range(0, len(ids), size):
        chunks.append(members_predicted(submission_ids=ids[start : start + size], run=estimate))
        _progress(estimate, stage="predicting", done=min(start + size, len(ids)), total=len(ids))
    return chunks


def _simulated_votes(estimate: JobEstimate, ids: list[int], members) -> ChunkSignals:
    """The signals an L1 estimate fuses: each member's votes drawn from a model fitted on the fit half of the
    evaluation split (:data:`OPERATOR_ONLY_LEARNER`, the operator-only baseline's; the report half stays unread),
    one draw per member and row, passed through the kind's own ``member_signal`` as the silos' votes would be."""
    public = arrays_from_npz_cached(estimate.public_dataset.features_file)["features"]
    evaluation = arrays_from_npz_cached(estimate.evaluation_split.data_file)
    labels, n_classes = evaluation["labels"], estimate.federation.n_classes
    if len(labels) < 2:
        raise JobInputError(
            "An L1 estimate needs at least two evaluation rows: it simulates the members' votes with a model "
            "fitted on half of them."
        )
    fit_rows = evaluation_halves(labels, seed=estimate.seed)[0]
    features = stored_features_in_view(
        np.vstack([public, evaluation["features"]]), estimate.public_dataset, OPERATOR_ONLY_VIEW
    )
    voter = operator_only_fit(
        OPERATOR_ONLY_LEARNER,
        features[len(public) :][fit_rows],
        labels[fit_rows],
        n_classes=n_classes,
        seed=estimate.seed,
    )
    probabilities = _widened(
        np.asarray(voter.predict_proba(features)),
        getattr(voter, "classes_", None),
        n_classes=n_classes,
    )
    _progress(estimate, stage="predicting", done=len(ids), total=len(ids))
    return chunk_signals_of(
        simulated_member_predictions(
            probabilities, n_models=[member.n_models for member in members], seed=estimate.seed
        ),
        member_ids=ids,
        members=members,
        algorithm=algorithm_get(estimate.kind),
        n_public=len(public),
        params=estimate.parameters,
    )


def _estimate(estimate: JobEstimate) -> dict:
    ids = _selected_ids(estimate)
    submissions = submissions_with_model_files(submission_ids=ids)
    members = job_members(
        submissions=[submissions[id] for id in ids], privacy_level=estimate.privacy_level
    )
    private_l1 = server_noise_used(privacy_level=estimate.privacy_level)
    chunks = [_simulated_votes(estimate, ids, members)] if private_l1 else _predicted(estimate, ids)
    signal_sum = sum(chunk.signal_sum for chunk in chunks)
    member_probabilities = np.concatenate([chunk.evaluation_probabilities for chunk in chunks])
    settings = algorithm_get(estimate.kind).validate(estimate.parameters)
    view = fitted_feature_view(settings)
    public = stored_features_in_view(
        arrays_from_npz_cached(estimate.public_dataset.features_file)["features"],
        estimate.public_dataset,
        view,
    )
    evaluation = arrays_from_npz_cached(estimate.evaluation_split.data_file)
    rows = EvaluationRows(
        stored_features_in_view(evaluation["features"], estimate.public_dataset, view),
        evaluation["labels"],
        member_probabilities,
        member_signals=np.concatenate([chunk.member_signals for chunk in chunks]),
    )
    candidates = _advised(estimate, submissions, ids) if private_l1 else []
    fusions = _fusions(estimate, private_l1=private_l1) + [
        _candidate_fusion(estimate, candidate) for candidate in candidates
    ]
    fuse = partial(
        fuse_in_child,
        kind=estimate.kind,
        signal_sum=signal_sum,
        public_features=public,
        members=members,
        n_classes=estimate.federation.n_classes,
        seed=estimate.seed,
        evaluation=rows if algorithm_get(estimate.kind).reads_evaluation(settings) else None,
        cancelled=lambda: False,
    )
    scored = []
    for step, (parameters, mechanism) in enumerate(fusions):
        _progress(estimate, stage="fusing", done=step, total=len(fusions))
        scored.append(_scored(estimate, fuse(params=parameters, noise=mechanism), rows, ids))
    _progress(estimate, stage="fusing", done=len(fusions), total=len(fusions))
    first_candidate = len(fusions) - len(candidates)
    candidates_scored = [
        {**candidate.as_dict(), "parameters": parameters, "metrics": headline(score["metrics"])}
        for candidate, (parameters, _), score in zip(
            candidates, fusions[first_candidate:], scored[first_candidate:], strict=True
        )
    ]
    scored = scored[:first_candidate]
    reference, draws = (scored[0], scored[1:]) if private_l1 else (None, scored)
    report = draws[0]["rows"]
    return {
        "candidates": candidates_scored,
        "private": metric_spread([draw["metrics"] for draw in draws]),
        "draws": [headline(draw["metrics"]) for draw in draws],
        "reference": headline(reference["metrics"]) if reference else None,
        "baselines": _baselines(
            estimate,
            submissions,
            ids,
            rows,
            report,
            draws[0]["metrics"],
            measure_silos=not private_l1,
        ),
        "votes": "simulated" if private_l1 else "members",
        "n_members": len(ids),
        "report_rows": int(len(report)),
    }


def _advised(estimate: JobEstimate, submissions: dict, ids: list[int]) -> list:
    """The advisor's candidates of an L1 estimate (issue 40 item 4, :func:`workers.privacy.plans.
    advised_candidates`): each setting whose noise fits every member's remaining budget, spending at most
    :data:`market.jobs.parameters.L1_DEFAULT_SHARE_OF_LIMIT` of what each has left (as a default job does of a new
    member's limit). The market proposes from their scores (:mod:`market.jobs.advice`)."""
    algorithm = algorithm_get(estimate.kind)
    privacy = PrivacySettings.of(estimate.parameters["privacy"])
    return advised_candidates(
        kind=algorithm,
        settings=estimate.parameters,
        budgets=budgets_within_share(
            member_budget_views(
                federation=estimate.federation,
                organisations=[submissions[id].organisation_id for id in ids],
                kind=estimate.kind,
                parameters=estimate.parameters,
            ),
            share=L1_DEFAULT_SHARE_OF_LIMIT,
        ),
        delta=privacy.delta,
        query_counts=advised_query_counts(
            n_queries=privacy.n_queries,
            n_public=estimate.public_dataset.n_rows,
            min_queries=MIN_TRAINING_ROWS,
        ),
        most_votes=len(ids) * algorithm.votes_per_submission(estimate.parameters),
    )


def _fusions(estimate: JobEstimate, *, private_l1: bool) -> list[tuple[dict, object]]:
    """The estimate's own fusions, (parameters, simulated noise): at L1 the noise-free reference, then one per
    simulated draw of the job's noise; at L2 one, without noise."""
    if not private_l1:
        return [(estimate.parameters, None)]
    noise = PrivacySettings.of(estimate.parameters["privacy"]).noise()
    return [(estimate.parameters, None)] + [
        (estimate.parameters, simulated_noise(noise, seed=seed))
        for seed in draw_seeds(estimate.seed, estimate.n_draws)
    ]


def _candidate_fusion(estimate: JobEstimate, candidate) -> tuple[dict, object]:
    """A candidate's job parameters and one simulated draw of its noise (the same seed for every candidate)."""
    parameters = {
        **with_query_count(estimate.parameters, candidate.privacy.n_queries),
        "privacy": candidate.privacy.as_dict(),
    }
    return parameters, simulated_noise(
        candidate.privacy.noise(), seed=draw_seeds(estimate.seed, 1)[0]
    )


def _scored(estimate: JobEstimate, fusion, rows: EvaluationRows, ids: list[int]) -> dict:
    """A fused model's metrics on the evaluation rows its job would report on (all, or those ``auto`` did not
    read). A fitted model predicts in this process (the server fitted it: it is not an upload); a bundle of members
    is their weighted average, as the job's bundle is."""
    if fusion.model is not None:
        probabilities = _widened(
            np.asarray(fusion.model.predict_proba(rows.features)),
            getattr(fusion.model, "classes_", None),
            n_classes=estimate.federation.n_classes,
        )
    else:
        weights = fusion.details.get("weights") or {str(id): 1.0 for id in ids}
        probabilities = average_probabilities(
            rows.member_probabilities, weights=[weights.get(str(id), 0.0) for id in ids]
        )
    report = evaluation_report_rows(estimate, rows.labels)
    metrics = classification_metrics(
        probabilities[report], rows.labels[report], n_classes=estimate.federation.n_classes
    )
    return {"metrics": metrics, "rows": report}


def _widened(probabilities: np.ndarray, classes, *, n_classes: int) -> np.ndarray:
    """``probabilities`` with a column per federation class (a model fitted without some class has fewer)."""
    if probabilities.shape[1] == n_classes or classes is None:
        return probabilities
    widened = np.zeros((len(probabilities), n_classes))
    widened[:, np.asarray(classes, dtype=np.int64)] = probabilities
    return widened


def _baselines(
    estimate: JobEstimate,
    submissions: dict,
    ids: list[int],
    rows: EvaluationRows,
    report,
    model_metrics: dict,
    *,
    measure_silos: bool,
) -> dict:
    """The majority-class guess, the best and average silo (unless not ``measure_silos``: an L1 estimate's members
    are simulated) and the operator-only model on the rows the model is scored on, measured as a job's are
    (market.jobs.baselines, workers.runner.fusing.job_operator_only_baseline)."""
    n_classes = estimate.federation.n_classes
    submission_metrics = (
        {
            str(id): classification_metrics(
                probabilities[report], rows.labels[report], n_classes=n_classes
            )
            for id, probabilities in zip(ids, rows.member_probabilities, strict=True)
        }
        if measure_silos
        else {}
    )
    measured = baselines_measure(
        class_counts=[sum(row) for row in model_metrics["confusion_matrix"]],
        submission_metrics=submission_metrics,
        organisation_of={id: submission.organisation_id for id, submission in submissions.items()},
    )
    operator_only = job_operator_only_baseline(estimate)
    return {**measured, "operator_only": operator_only[0] if operator_only else None}
