"""Privacy budgets: reserve, charge, release and adjust, each under the budget rows' locks with a ledger line.

A request that does not fit raises :class:`BudgetExceeded` before anything is written; the caller's
transaction rolls back, and the caller records the refusal with :func:`budget_refusal_record` after the
rolled-back block. How spends are composed and stored: :mod:`market.budgets.ledger`; pricing and
calibration (no writes): :mod:`market.budgets.pricing`, re-exported here.
"""

from decimal import ROUND_CEILING, Decimal, InvalidOperation

from django.db import IntegrityError, transaction

from market.accounts.models import User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.augmentations.models import Augmentation
from market.budgets.ledger import (
    BudgetAmounts,
    BudgetExceeded,
    augmentation_key,
    budget_amounts,
    budget_entry_write,
    budget_refuse,
    budget_shortfall,
    budget_shortfall_line,
    budgets_ensure,
    budgets_locked,
    epsilon_decimal,
    ledger_state,
)
from market.budgets.models import EPSILON_QUANTUM, BudgetEntry, EntryKind, PrivacyBudget
from market.budgets.pricing import (
    budget_calibrate,
    budget_price_job,
    job_privacy_cost,
    job_votes_per_submission,
    silo_vote_shifts,
)
from market.constraints import violated_constraint
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from market.federations.models import PrivacyLevel
from market.jobs.models import Job
from market.submissions.models import Submission
from workers.privacy.costs import CONFIDENT_KEYS, PrivacyCost, declared_cost, declared_cost_at
from workers.privacy.declarations import party_side_rdp
from workers.privacy.reports import DP_SGD_MECHANISM, PARTY_LEVEL, JobPrivacyReport, PrivacyReport

__all__ = [
    "BudgetExceeded",
    "budget_calibrate",
    "budget_charge_for_augmentation",
    "budget_charge_for_job",
    "budget_charge_for_submission",
    "budget_limit_set",
    "budget_price_job",
    "budget_refusal_record",
    "budget_release_for_augmentation",
    "budget_release_for_job",
    "budget_reserve_for_augmentation",
    "budget_reserve_for_job",
    "budgets_ensure",
    "epsilon_decimal",
    "job_privacy_cost",
    "job_votes_per_submission",
    "ledger_state",
    "budget_amounts",
]


# --- L1 jobs -------------------------------------------------------------------------------------------------------
# A silo is reserved and charged for the votes its own data moves: the kind's votes per submission × its
# submissions in the job (k submissions of one silo can all switch class together), at the kind's price
# (market.budgets.pricing). The job's bound is that of the silo that moves the most.


def job_vote_shifts(job: Job) -> dict[int, int]:
    """Organisation id → the votes that silo's data moves per query of the job (s × its submissions in it, times
    the largest vote weight of a weighted vote)."""
    return silo_vote_shifts(
        organisations=job.submissions.values_list("organisation_id", flat=True),
        votes_per_submission=job_votes_per_submission(kind=job.kind, parameters=job.parameters),
    )


def _job_costs(job: Job, privacy: dict, shifts: dict[int, int]) -> dict[int, PrivacyCost]:
    """Each silo's cost of the job: ``privacy`` is the job's privacy parameters or the noise it used (same keys)."""
    return {
        organisation_id: job_privacy_cost(
            kind=job.kind, parameters=job.parameters, privacy=privacy, vote_shift=shift
        )
        for organisation_id, shift in shifts.items()
    }


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


def budget_reserve_for_job(*, job: Job, actor: User | None) -> None:
    """Reserve an L1 job's data-independent bound for every participating silo (each for the votes its submissions
    move), or refuse without writing.

    Call inside the transaction that saved the job and its submissions. Sets ``job.privacy_bound`` to the bound of
    the silo that moves the most votes. Reserving again for the same job changes nothing.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    shifts = job_vote_shifts(job)
    costs = _job_costs(job, (job.parameters or {}).get("privacy") or {}, shifts)
    with transaction.atomic():
        budgets = budgets_locked(federation=job.federation, organisation_ids=shifts)
        plans, shortfalls = [], []
        for budget in budgets:
            state = ledger_state(budget)
            if job.id in state.open_reservations or job.id in state.charged_jobs:
                continue
            cost = costs[budget.organisation_id]
            amounts = budget_amounts(
                budget=budget,
                charged=state.charged,
                reserved=[*(c for c, _ in state.open_reservations.values()), cost],
            )
            shortfall = budget_shortfall(budget, amounts)
            shortfalls += [shortfall] if shortfall else []
            plans.append((budget, amounts, cost))
        if shortfalls:
            # Named by what it is, not by its id: a refused launch rolls the job back, and "job #3" would
            # later name another job.
            what = f"a {job.get_kind_display()} job at {job.privacy_level}"
            budget_refuse(job.federation, shortfalls, what=what, unit=PARTY_LEVEL)
        for budget, amounts, cost in plans:
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.RESERVE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                job=job,
                actor=actor,
                parameters=_job_ledger_parameters(job, cost),
            )
        bound = max(costs.values(), key=lambda cost: cost.report.vote_shift)
        job.privacy_bound = (
            bound.report.as_dict()
        )  # PrivacyReport fields only, as the jobs side stores it
        job.save(update_fields=["privacy_bound"])


def _job_ledger_parameters(
    job: Job, cost: PrivacyCost, data_dependent: PrivacyReport | None = None
) -> dict:
    parameters = {
        "privacy": (job.parameters or {}).get("privacy"),
        "partitions": (job.parameters or {}).get("partitions"),
        "job_kind": job.kind,
        "vote_shift": cost.report.vote_shift,
    }
    if data_dependent is not None:
        parameters["data_dependent"] = data_dependent.as_dict()
    return parameters


def budget_charge_for_job(*, job: Job, privacy_report: JobPrivacyReport) -> None:
    """Charge each participating silo the data-independent ε of what the job actually queried, for the votes its
    own submissions move; idempotent.

    Call in the transaction that marks the job succeeded (or, after noise was drawn, failed). The
    data-dependent ε (of the silo that moves the most votes) is recorded on the ledger line, never charged: it is
    itself private information and charging it would publish it through the remainder. A report without a
    data-independent bound releases.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    independent = privacy_report.data_independent
    if independent is None:
        budget_release_for_job(job=job)
        return
    shifts = job_vote_shifts(job)
    costs = _job_costs(job, _noise_used(independent), shifts)
    with transaction.atomic():
        for budget in budgets_locked(federation=job.federation, organisation_ids=shifts):
            state = ledger_state(budget)
            if job.id in state.charged_jobs:
                continue
            cost = costs[budget.organisation_id]
            state.open_reservations.pop(job.id, None)
            amounts = budget_amounts(
                budget=budget,
                charged=[*state.charged, cost],
                reserved=[c for c, _ in state.open_reservations.values()],
            )
            shortfall = budget_shortfall(budget, amounts)
            if shortfall:
                budget_refuse(
                    job.federation,
                    [shortfall],
                    what=f"job #{job.id}'s actual spend",
                    unit=cost.report.unit,
                )
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.CHARGE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                job=job,
                parameters=_job_ledger_parameters(job, cost, privacy_report.data_dependent),
            )


def budget_release_for_job(*, job: Job) -> None:
    """Release a job's open reservations (failure or cancellation before any noise was drawn); idempotent."""
    with transaction.atomic():
        reserved_in = BudgetEntry.objects.filter(job=job, kind=EntryKind.RESERVE).values(
            "budget_id"
        )
        budgets = list(
            PrivacyBudget.objects.select_for_update(of=("self",))
            .select_related("organisation")
            .filter(id__in=reserved_in)
            .order_by("id")
        )
        for budget in budgets:
            state = ledger_state(budget)
            reservation = state.open_reservations.pop(job.id, None)
            if reservation is None:
                continue
            cost, entry = reservation
            amounts = budget_amounts(
                budget=budget,
                charged=state.charged,
                reserved=[c for c, _ in state.open_reservations.values()],
            )
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.RELEASE,
                epsilon=entry.epsilon,
                cost=cost,
                job=job,
                parameters=entry.parameters,
            )


# --- L2 submissions ------------------------------------------------------------------------------------------------


def _submission_cost(submission: Submission, *, budget: PrivacyBudget) -> PrivacyCost:
    """A declared δ above the budget's is refused. DP-SGD: recomputed at the budget's δ from the declared σ,
    sample rate and steps (at least the declared ε), composed through RDP. FedKT vote noise: the declared (ε, δ),
    composed through RDP when it is exactly the bound, else additively."""
    report = PrivacyReport(**submission.privacy_report)
    if report.delta > float(budget.delta):
        raise InvalidInput(
            f"You declared δ = {report.delta:g}, but your privacy budget in '{submission.federation.slug}' "
            f"holds at δ = {float(budget.delta):g}; train and declare at δ ≤ {float(budget.delta):g}."
        )
    curve = party_side_rdp(report)  # FedKT vote noise or DP-SGD (workers.privacy.dp_sgd)
    if report.mechanism == DP_SGD_MECHANISM:
        return declared_cost_at(
            epsilon=float(submission.declared_epsilon),
            delta=float(budget.delta),
            bound=report,
            bound_rdp=curve,
        )
    return declared_cost(
        epsilon=float(submission.declared_epsilon),
        delta=report.delta,
        bound=report,
        bound_rdp=curve,
    )


def budget_charge_for_submission(*, submission: Submission, actor: User | None) -> None:
    """Charge an L2 submission's declared ε to its silo's budget, or raise BudgetExceeded without writing.

    Call inside the transaction that stores the submission. Other levels cost nothing here.
    """
    if submission.privacy_level != PrivacyLevel.L2 or not submission.privacy_report:
        return
    with transaction.atomic():
        [budget] = budgets_locked(
            federation=submission.federation, organisation_ids=[submission.organisation_id]
        )
        state = ledger_state(budget)
        if submission.id in state.charged_submissions:
            return
        cost = _submission_cost(submission, budget=budget)
        amounts = budget_amounts(
            budget=budget,
            charged=[*state.charged, cost],
            reserved=[c for c, _ in state.open_reservations.values()],
        )
        shortfall, what = budget_shortfall_line(budget, amounts), "this submission's declared ε"
        if amounts.committed > budget.epsilon_limit:
            budget_refuse(submission.federation, [shortfall], what=what, unit=cost.report.unit)
        try:
            with (
                transaction.atomic()
            ):  # a savepoint: the CHECK constraint has the last word on overspending
                budget_entry_write(
                    budget,
                    amounts,
                    kind=EntryKind.CHARGE,
                    epsilon=epsilon_decimal(cost.report.epsilon),
                    cost=cost,
                    submission=submission,
                    actor=actor,
                    parameters={
                        "privacy": submission.privacy_parameters,
                        "declared_epsilon": submission.declared_epsilon,
                    },
                )
        except (
            IntegrityError
        ) as error:  # refused by the database all the same: the same sentence as above
            if violated_constraint(error) != "budget_never_overspent":
                raise
            budget_refuse(submission.federation, [shortfall], what=what, unit=cost.report.unit)


# --- FAug generators with a DP discriminator ------------------------------------------------------------------------
# The discriminator's DP-SGD run is known before training (σ, sampling rate, steps), so its example-level ε is
# reserved for every silo that contributed seeds when training starts, charged when the generator is published and
# released when training fails (nothing was published). Keyed in the ledger by the augmentation (never a job).


def budget_reserve_for_augmentation(
    *, augmentation: Augmentation, organisation_ids, cost: PrivacyCost, actor: User | None
) -> None:
    """Reserve ``cost`` for each contributing silo, or raise BudgetExceeded without writing; idempotent.

    Call inside the transaction that queues the training."""
    key = augmentation_key(augmentation.id)
    with transaction.atomic():
        budgets = budgets_locked(
            federation=augmentation.federation, organisation_ids=organisation_ids
        )
        plans, shortfalls = [], []
        for budget in budgets:
            state = ledger_state(budget)
            if key in state.open_reservations or augmentation.id in state.charged_augmentations:
                continue
            amounts = budget_amounts(
                budget=budget,
                charged=state.charged,
                reserved=[*(c for c, _ in state.open_reservations.values()), cost],
            )
            shortfall = budget_shortfall(budget, amounts)
            shortfalls += [shortfall] if shortfall else []
            plans.append((budget, amounts))
        if shortfalls:
            budget_refuse(
                augmentation.federation,
                shortfalls,
                what=f"the DP generator of augmentation #{augmentation.id}",
                unit=cost.report.unit,
            )
        for budget, amounts in plans:
            budget_entry_write(
                budget,
                amounts,
                kind=EntryKind.RESERVE,
                epsilon=epsilon_decimal(cost.report.epsilon),
                cost=cost,
                augmentation=augmentation,
                actor=actor,
                parameters={"privacy": augmentation.privacy_parameters},
            )


def budget_charge_for_augmentation(*, augmentation: Augmentation) -> None:
    """Turn the augmentation's open reservations into charges (the generator is published); idempotent."""
    _close_augmentation_reservations(augmentation, kind=EntryKind.CHARGE)


def budget_release_for_augmentation(*, augmentation: Augmentation) -> None:
    """Release the augmentation's open reservations (training failed, nothing published); idempotent."""
    _close_augmentation_reservations(augmentation, kind=EntryKind.RELEASE)


def _close_augmentation_reservations(augmentation: Augmentation, *, kind: str) -> None:
    """Each open reservation of the augmentation becomes a charge or a release; a closed one is skipped."""
    key = augmentation_key(augmentation.id)
    with transaction.atomic():
        for budget in _budgets_reserved_for(augmentation):
            state = ledger_state(budget)
            reservation = state.open_reservations.pop(key, None)
            if reservation is None:
                continue
            cost, entry = reservation
            charged = [*state.charged, cost] if kind == EntryKind.CHARGE else state.charged
            budget_entry_write(
                budget,
                budget_amounts(
                    budget=budget,
                    charged=charged,
                    reserved=[c for c, _ in state.open_reservations.values()],
                ),
                kind=kind,
                epsilon=entry.epsilon,
                cost=cost,
                augmentation=augmentation,
                parameters=entry.parameters,
            )


def _budgets_reserved_for(augmentation: Augmentation) -> list[PrivacyBudget]:
    reserved_in = BudgetEntry.objects.filter(
        augmentation=augmentation, kind=EntryKind.RESERVE
    ).values("budget_id")
    return list(
        PrivacyBudget.objects.select_for_update(of=("self",))
        .select_related("organisation")
        .filter(id__in=reserved_in)
        .order_by("id")
    )


# --- refusals and limits -------------------------------------------------------------------------------------------


def budget_refusal_record(
    *,
    error: BudgetExceeded,
    actor: User | None,
    target=None,
    request=None,
    details: dict | None = None,
) -> None:
    """Audit a refusal ("budget.refused"); call after the rolled-back block, so the event survives."""
    audit_record(
        action="budget.refused",
        outcome=AuditOutcome.REFUSED,
        actor=actor,
        target=target,
        request=request,
        details={**error.details, "message": str(error), **(details or {})},
    )


def _clean_limit(epsilon_limit) -> Decimal:
    try:
        limit = Decimal(str(epsilon_limit))
    except (InvalidOperation, ValueError) as error:
        raise InvalidInput(f"The ε limit must be a number, got {epsilon_limit!r}.") from error
    if not limit.is_finite() or limit < 0 or limit > Decimal("999999"):
        raise InvalidInput("The ε limit must be a number from 0 to 999999.")
    return limit.quantize(EPSILON_QUANTUM, rounding=ROUND_CEILING)


def budget_limit_set(
    *, budget_id: int, epsilon_limit, reason: str, actor: User, request=None
) -> PrivacyBudget:
    """An operator sets a silo's ε limit; refused (409) below what is already spent and reserved. Audited."""
    if not actor.is_operator:
        raise PermissionDenied("Only market operators can change privacy budget limits.")
    limit = _clean_limit(epsilon_limit)
    refusal = None
    with transaction.atomic():
        budget = (
            PrivacyBudget.objects.select_for_update(of=("self",))
            .select_related("organisation", "federation")
            .filter(id=budget_id)
            .first()
        )
        if budget is None:
            raise NotFound(f"There is no privacy budget #{budget_id}.")
        previous = budget.epsilon_limit
        details = {
            "federation": budget.federation.slug,
            "organisation": budget.organisation.name,
            "previous_limit": str(previous),
            "requested_limit": str(limit),
            "reason": reason,
        }
        if limit < budget.spent + budget.reserved:
            refusal = Conflict(
                f"{budget.organisation.name} has already spent and reserved ε = "
                f"{budget.spent + budget.reserved} in '{budget.federation.slug}'; the limit cannot go "
                f"below that (you asked for {limit})."
            )
        else:
            budget.epsilon_limit = limit
            budget_entry_write(
                budget,
                BudgetAmounts(budget.spent, budget.reserved, budget.composition_rule),
                kind=EntryKind.ADJUST,
                epsilon=limit - previous,
                cost=None,
                actor=actor,
                reason=reason,
                parameters={"previous_limit": str(previous), "epsilon_limit": str(limit)},
            )
            audit_record(
                action="budget.limit_changed",
                actor=actor,
                organisation=budget.organisation,
                target=budget,
                request=request,
                details=details,
            )
    if refusal is not None:
        audit_record(
            action="budget.limit_changed",
            outcome=AuditOutcome.REFUSED,
            actor=actor,
            organisation=budget.organisation,
            target=budget,
            request=request,
            details={**details, "message": str(refusal)},
        )
        raise refusal
    return budget
