"""A global model's contribution values (issue 28), computed by the job's finalize: each silo's Shapley value of
the job's own vote or average on the evaluation rows the global model is reported on (:mod:`workers.valuation`).

Which combination a coalition is re-counted with follows the job: FedKT's hard votes (``consistent_hard``,
``class_weighted``) are counted as one vote per member; FedKT's ``soft`` vote, ``auto``'s choice of ``soft``, the
ensemble or the stack, and the ensemble, distillation and stack kinds average the members' probabilities; cohort
distillation (``cpfl``) averages their log-probabilities per class, weighted by each cohort's declared class
counts (the ``cohort`` rule). The silos are organisations: every submission of one
organisation is a member of the same player.
"""

from __future__ import annotations

import time

import numpy as np

from market.jobs.models import Job
from market.jobs.services import job_log
from market.storage import arrays_from_npz_cached
from workers.algorithms.cohort import label_counts_of
from workers.runner.fusing import FusedJob, job_chunk_signals
from workers.valuation import contribution_values

#: Kinds whose fusion is an average of the members' probabilities.
AVERAGING_KINDS = frozenset({"ensemble", "distill", "stack"})
#: FedKT vote rules (and ``auto`` choices) that average the members' probabilities rather than count votes.
AVERAGING_VOTES = frozenset({"soft", "ensemble_selected", "stacked"})


def valuation_rule(job: Job, fusion_details: dict) -> str | None:
    """``"vote"``, ``"average"``, ``"cohort"`` or None (no vote or average to value)."""
    if job.kind in AVERAGING_KINDS:
        return "average"
    if job.kind == "cpfl":
        return "cohort"
    if job.kind != "fedkt":
        return None
    vote = (job.parameters or {}).get("vote", "consistent_hard")
    if vote == "auto":
        vote = ((fusion_details or {}).get("auto") or {}).get("chosen", "consistent_hard")
    return "average" if vote in AVERAGING_VOTES else "vote"


def job_contribution_values(job: Job, fused: FusedJob, rows: np.ndarray | None) -> dict:
    """The values stored on the global model (``{}`` when the kind has no vote or average); ``rows``: the report
    rows of the evaluation split (None: all of them). The job's log says how long the valuation took (the
    valuation benchmark, docs/results/valuation.md, reads it beside the job's own wall time)."""
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
