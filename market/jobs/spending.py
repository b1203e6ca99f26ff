"""An L1 job as a spender of privacy (:class:`market.budgets.spending.Spender`): reserved before it is queued, charged
with its success (or when it fails after its release step), released when it ends before anything derived from its
noisy votes left the worker (:func:`market.jobs.services.job_settle_budget`, issue 45).

A silo is reserved and charged for the votes its own data moves: the kind's votes per submission × its submissions
in the job (k submissions of one silo can all switch class together), at the kind's price
(:mod:`market.jobs.privacy_costs`). The job's bound is that of the silo that moves the most. L0 and L2 jobs spend
nothing here (L2 students are charged at upload; fusing them is post-processing).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from market.accounts.models import User
from market.budgets.spending import (
    SpenderKind,
    budget_charge,
    budget_release,
    budget_reserve,
)
from market.federations.models import Federation, PrivacyLevel
from market.jobs.models import Job
from market.jobs.privacy_costs import job_privacy_cost, job_votes_per_submission, silo_vote_shifts
from workers.privacy.costs import PrivacyCost
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL, JobPrivacyReport, PrivacyReport
from workers.privacy.settings import CONFIDENT_KEYS

JOB_SPENDER = SpenderKind(spender_kind="job", label="Job", page="job-detail")


@dataclass
class JobSpender:
    """A job's spend at ``privacy``: its privacy parameters when reserving, the noise it used when charging."""

    job: Job
    privacy: Mapping = field(default_factory=dict)
    spender_kind = JOB_SPENDER.spender_kind

    @property
    def privacy_unit(self) -> str:
        """The unit the job's ε is counted in, as its kind prices it: party-level, or example-level for a job that
        protects one record (``privacy.unit`` "record")."""
        units = {cost.report.unit for cost in self.costs.values()}
        return EXAMPLE_LEVEL if EXAMPLE_LEVEL in units else PARTY_LEVEL

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def federation(self) -> Federation:
        return self.job.federation

    @cached_property
    def costs(self) -> dict[int, PrivacyCost]:
        job = self.job
        return {
            organisation_id: job_privacy_cost(
                kind=job.kind, parameters=job.parameters, privacy=self.privacy, vote_shift=shift
            )
            for organisation_id, shift in job_vote_shifts(job).items()
        }

    def privacy_costs(self) -> Mapping[int, PrivacyCost]:
        return self.costs


def job_vote_shifts(job: Job) -> dict[int, int]:
    """Organisation id → the votes that silo's data moves per query of the job (s × its submissions in it, times
    the largest vote weight of a weighted vote)."""
    return silo_vote_shifts(
        organisations=job.submissions.values_list("organisation_id", flat=True),
        votes_per_submission=job_votes_per_submission(kind=job.kind, parameters=job.parameters),
    )


def _noise_used(bound: PrivacyReport) -> dict:
    """The noise an L1 job actually used, read from its data-independent bound, in the shape of the job's
    ``parameters["privacy"]`` (what its kind prices)."""
    return {
        "mechanism": bound.mechanism,
        "gamma": bound.gamma,
        "sigma": bound.sigma,
        "delta": bound.delta,
        "n_queries": bound.n_queries,
        **{
            name: getattr(bound, name)
            for name in CONFIDENT_KEYS
            if getattr(bound, name) is not None
        },
    }


def _ledger_parameters(job: Job, data_dependent: PrivacyReport | None = None):
    """A silo's ledger line: the job's noise and kind, and the votes that silo moves."""

    def of(cost: PrivacyCost) -> dict:
        parameters = {
            "privacy": (job.parameters or {}).get("privacy"),
            "partitions": (job.parameters or {}).get("partitions"),
            "job_kind": job.kind,
            "vote_shift": cost.report.vote_shift,
        }
        if data_dependent is not None:
            parameters["data_dependent"] = data_dependent.as_dict()
        return parameters

    return of


def job_budget_reserve(*, job: Job, actor: User | None) -> None:
    """Reserve an L1 job's data-independent bound for every participating silo (each for the votes its submissions
    move), or refuse without writing.

    Call inside the transaction that saved the job and its submissions. Sets ``job.privacy_bound`` to the bound of
    the silo that moves the most votes. Reserving again for the same job changes nothing.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    spender = JobSpender(job, privacy=(job.parameters or {}).get("privacy") or {})
    budget_reserve(
        spender=spender,
        actor=actor,
        parameters=_ledger_parameters(job),
        # Named by what it is, not by its id: a refused launch rolls the job back, and "job #3" would later name
        # another job.
        described_as=f"a {job.get_kind_display()} job at {job.privacy_level}",
    )
    bound = max(spender.costs.values(), key=lambda cost: cost.report.vote_shift)
    job.privacy_bound = (
        bound.report.as_dict()
    )  # PrivacyReport fields only, as the jobs side stores it
    job.save(update_fields=["privacy_bound"])


def job_budget_charge(*, job: Job, privacy_report: JobPrivacyReport, reason: str = "") -> None:
    """Charge each participating silo the data-independent ε of what the job actually queried, for the votes its
    own submissions move; idempotent.

    Call in the transaction that marks the job succeeded (or, after its release step, failed). The
    data-dependent ε (of the silo that moves the most votes) is recorded on the ledger line, never charged: it is
    itself private information and charging it would publish it through the remainder. A report without a
    data-independent bound releases. ``reason``: why, on each silo's ledger line.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    independent = privacy_report.data_independent
    if independent is None:
        job_budget_release(job=job, reason=reason)
        return
    budget_charge(
        spender=JobSpender(job, privacy=_noise_used(independent)),
        parameters=_ledger_parameters(job, privacy_report.data_dependent),
        reason=reason,
    )


def job_budget_release(*, job: Job, reason: str = "") -> None:
    """Release a job's open reservations (it ended before its release step); idempotent. ``reason``: why, on
    each silo's ledger line."""
    budget_release(spender=JobSpender(job), reason=reason)
