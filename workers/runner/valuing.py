"""A global model's contribution values (issue 28), computed by the job's finalize: each silo's Shapley value of
the job's own vote or average on the evaluation rows the global model is reported on (:mod:`workers.valuation`).

Which combination a coalition is re-counted with is the job kind's own ``valuation_rule``
(workers.algorithms.registry.VALUATION_RULES): FedKT's hard votes are counted as one vote per member, its soft vote
and the ensemble, distillation and stack kinds average the members' probabilities, cohort distillation averages
their log-probabilities per class (``cohort``); ``auto``'s choice of ``operator_only`` used no silo, so no silo is
valued or weighted (:data:`NO_SILO_VALUED`). The silos are organisations: every submission of one
organisation is a member of the same player.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from market.jobs.services import job_log
from market.storage import arrays_from_npz_cached
from workers.algorithms import algorithm_get
from workers.algorithms.cohort import label_counts_of
from workers.algorithms.operator_only import silos_added_nothing
from workers.runner.fusing import FusedJob, job_chunk_signals
from workers.valuation import contribution_values

# Row types for annotations only: rows reach the runner through market.jobs' selectors and services.
if TYPE_CHECKING:
    from market.jobs.models import Job


def valuation_rule(job: Job, fusion_details: dict) -> str | None:
    """``"vote"``, ``"average"``, ``"cohort"`` or None, as the job's kind says (its protocol's ``valuation_rule``:
    the registry is the one place that knows a kind)."""
    return algorithm_get(job.kind).valuation_rule(job.parameters or {}, fusion_details or {})


def job_contribution_values(job: Job, fused: FusedJob, rows: np.ndarray | None) -> dict:
    """The values stored on the global model (``{}`` when the kind has no vote or average); ``rows``: the report
    rows of the evaluation split (None: all of them). The job's log says how long the valuation took (the
    valuation benchmark, docs/results/valuation.md, reads it beside the job's own wall time). A model that used no
    silo values none: ``{"silos": {}, "reason": NO_SILO_VALUED}``, and the log says why."""
    if silos_added_nothing(fused.fusion.details):
        job_log(job_id=job.id, message=NO_SILO_VALUED)
        return {"silos": {}, "reason": NO_SILO_VALUED}
    rule = valuation_rule(job, fused.fusion.details)
    if rule is None:
        return {}
    labels = arrays_from_npz_cached(job.evaluation_split.data_file)["labels"]
    rows = np.arange(len(labels)) if rows is None else rows
    per_silo: dict[str, list[np.ndarray]] = {}
    class_counts: dict[str, list[np.ndarray]] = {}
    for chunk in job_chunk_signals(job):
        for member_id, probabilities in zip(chunk.member_ids, chunk.evaluation_probabilities):
            submission = fused.submissions[int(member_id)]
            organisation = str(submission.organisation_id)
            per_silo.setdefault(organisation, []).append(probabilities[rows])
            if rule == "cohort":
                class_counts.setdefault(organisation, []).append(
                    label_counts_of(submission.label_distribution, submission.n_local_examples)
                )
    if not per_silo:
        return {}
    started = time.perf_counter()
    values = contribution_values(
        per_silo,
        labels[rows],
        rule=rule,
        n_classes=job.federation.n_classes,
        seed=abs(job.seed or 0),
        member_class_counts=class_counts if rule == "cohort" else None,
    )
    job_log(job_id=job.id, message=valuation_logged(values, time.perf_counter() - started))
    return values


#: Why a model chosen ``operator_only`` by ``vote: auto`` has no contribution value and credits no silo.
NO_SILO_VALUED = (
    "No silo has a contribution value: vote auto chose the model fitted on the operator's evaluation rows alone, "
    "which used no silo's upload, so every silo's contribution weight is 0."
)


def contribution_weights_unused(fused: FusedJob) -> dict[str, float] | None:
    """Every taking-part organisation's contribution weight, 0, when the global model used no silo (the job's
    ``contribution_rule`` is then :data:`NO_SILO_VALUED`); else None (weigh by agreement)."""
    if not silos_added_nothing(fused.fusion.details):
        return None
    return {str(submission.organisation_id): 0.0 for submission in fused.submissions.values()}


#: The start of the job log's line on the valuation (:func:`valuation_logged`).
VALUATION_LOGGED = "Contribution values of"


def valuation_logged(values: dict, seconds: float) -> str:
    """The log line: how many silos, by which estimator, in how many seconds (no silo's value: every participant
    reads the log)."""
    estimator = (
        "exact Shapley"
        if values["estimator"] == "exact"
        else f"permutation sampling, {values['permutations']} orders"
    )
    return (
        f"{VALUATION_LOGGED} {len(values['silos'])} silo(s) ({estimator}, {values['rows']} rows) "
        f"computed in {seconds:.2f} s."
    )
