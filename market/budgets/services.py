"""Privacy budgets: reserve, charge, release and adjust, each under the budget rows' locks with a ledger line.

The spend of a budget is never a sum of floats kept in the database: under the row lock the ledger's
costs are composed again by the accountant (:func:`workers.privacy.costs.compose_costs`), and the
result is stored (rounded up to 1e-6) beside the rule that produced it. Budget rows are always locked
in id order, so two requests touching the same silos cannot deadlock. A request that does not fit
raises :class:`BudgetExceeded` before anything is written; the caller's transaction rolls back, and
the caller records the refusal with :func:`budget_refusal_record` after the rolled-back block.
"""

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from django.db import transaction

from market.accounts.models import Organisation, User
from market.audit.models import AuditOutcome
from market.audit.services import audit_record
from market.budgets.models import EPSILON_QUANTUM, BudgetEntry, EntryKind, PrivacyBudget
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from market.federations.models import Federation, Membership, PrivacyLevel
from market.jobs.models import Job
from market.submissions.models import Submission
from workers.privacy.costs import (BudgetView, PrivacyCost, calibrate_noise, calibrate_queries, compose_costs,
                                   declared_cost, fedkt_l1_cost, fedkt_l1_cost_from_parameters, noise_mechanism)
from workers.privacy.rdp import RENYI_ORDERS
from workers.privacy.reports import PrivacyReport


class BudgetExceeded(Conflict):
    """A request would overspend at least one silo's budget. ``details["silos"]`` lists each such silo with
    ``organisation_id``, ``organisation``, ``budget_id``, ``needed`` and ``remaining`` (ε, as strings)."""

    def __init__(self, message: str, *, details: dict):
        super().__init__(message)
        self.details = details


def epsilon_decimal(epsilon: float) -> Decimal:
    """ε as a stored Decimal, rounded up to 1e-6 so that rounding never hides a spend."""
    return Decimal(repr(float(epsilon))).quantize(EPSILON_QUANTUM, rounding=ROUND_CEILING)


# --- budgets exist for every member --------------------------------------------------------------------------------

def budgets_ensure(*, federation: Federation, organisation_ids=None) -> None:
    """Create the missing budgets of members (all, or those listed) with the federation's defaults.

    ``ON CONFLICT DO NOTHING``: two requests creating the same budget at once both succeed, one row results.
    """
    members = Membership.objects.filter(federation=federation)
    if organisation_ids is not None:
        members = members.filter(organisation_id__in=list(organisation_ids))
    missing = members.exclude(organisation__privacy_budgets__federation=federation).values_list("organisation_id",
                                                                                                 flat=True)
    PrivacyBudget.objects.bulk_create(
        [PrivacyBudget(federation=federation, organisation_id=organisation_id,
                       epsilon_limit=federation.default_epsilon_limit, delta=federation.default_delta)
         for organisation_id in missing], ignore_conflicts=True)


def _budgets_locked(*, federation: Federation, organisation_ids) -> list[PrivacyBudget]:
    """The budgets of these silos, created if missing, locked FOR UPDATE in id order (no deadlocks)."""
    organisation_ids = sorted(set(organisation_ids))
    budgets_ensure(federation=federation, organisation_ids=organisation_ids)
    budgets = list(PrivacyBudget.objects.select_for_update(of=("self",)).select_related("organisation")
                   .filter(federation=federation, organisation_id__in=organisation_ids).order_by("id"))
    missing = set(organisation_ids) - {budget.organisation_id for budget in budgets}
    if missing:
        names = ", ".join(Organisation.objects.filter(id__in=missing).values_list("name", flat=True))
        raise InvalidInput(f"{names} must be members of '{federation.slug}' to spend privacy there.")
    return budgets


# --- the ledger, replayed ------------------------------------------------------------------------------------------

@dataclass
class LedgerState:
    """A budget's costs, replayed from its ledger: what is charged, and reservations still open per job."""

    charged: list[PrivacyCost]
    open_reservations: dict[int, tuple[PrivacyCost, BudgetEntry]]
    charged_jobs: set[int]
    charged_submissions: set[int]

    def committed(self) -> list[PrivacyCost]:
        return self.charged + [cost for cost, _ in self.open_reservations.values()]


def ledger_state(budget: PrivacyBudget) -> LedgerState:
    state = LedgerState(charged=[], open_reservations={}, charged_jobs=set(), charged_submissions=set())
    for entry in budget.entries.order_by("id"):
        if entry.kind == EntryKind.RESERVE:
            state.open_reservations[entry.job_id] = (PrivacyCost.from_dict(entry.cost), entry)
        elif entry.kind in (EntryKind.CHARGE, EntryKind.RELEASE):
            state.open_reservations.pop(entry.job_id, None)
        if entry.kind == EntryKind.CHARGE:
            state.charged.append(PrivacyCost.from_dict(entry.cost))
            if entry.job_id is not None:
                state.charged_jobs.add(entry.job_id)
            if entry.submission_id is not None:
                state.charged_submissions.add(entry.submission_id)
    return state


@dataclass(frozen=True)
class BudgetAmounts:
    spent: Decimal
    reserved: Decimal
    rule: str

    @property
    def committed(self) -> Decimal:
        return self.spent + self.reserved


def budget_amounts(*, budget: PrivacyBudget, charged: list[PrivacyCost], reserved: list[PrivacyCost]) -> BudgetAmounts:
    """Spent and reserved ε composed by the accountant at the budget's δ (reserved = what reservations add)."""
    delta = float(budget.delta)
    spent = epsilon_decimal(compose_costs(charged, delta=delta).epsilon)
    everything = compose_costs([*charged, *reserved], delta=delta)
    committed = max(epsilon_decimal(everything.epsilon), spent)
    return BudgetAmounts(spent=spent, reserved=committed - spent, rule=everything.rule)


def _shortfall(budget: PrivacyBudget, amounts: BudgetAmounts) -> dict | None:
    if amounts.committed <= budget.epsilon_limit:
        return None
    return {"organisation_id": budget.organisation_id, "organisation": budget.organisation.name,
            "budget_id": budget.id, "needed": str(amounts.committed - budget.spent - budget.reserved),
            "remaining": str(budget.remaining), "epsilon_limit": str(budget.epsilon_limit)}


def _refuse(federation: Federation, shortfalls: list[dict], *, what: str, unit: str) -> None:
    first = shortfalls[0]
    others = f" ({len(shortfalls) - 1} other silo(s) too)" if len(shortfalls) > 1 else ""
    raise BudgetExceeded(
        f"{first['organisation']}'s privacy budget in '{federation.slug}' has ε = {first['remaining']} left, but "
        f"{what} needs ε = {first['needed']} more ({unit}){others}. Add more noise, query fewer public rows, or ask "
        "an operator to raise the limit.",
        details={"federation": federation.slug, "silos": shortfalls})


def _write(budget: PrivacyBudget, amounts: BudgetAmounts, *, kind: str, epsilon: Decimal, cost: PrivacyCost | None,
           job: Job | None = None, submission: Submission | None = None, actor: User | None = None,
           reason: str = "", parameters: dict | None = None) -> BudgetEntry:
    budget.spent, budget.reserved, budget.composition_rule = amounts.spent, amounts.reserved, amounts.rule
    budget.save(update_fields=["spent", "reserved", "composition_rule", "epsilon_limit", "updated_at"])
    report = cost.report if cost else None
    return BudgetEntry.objects.create(
        budget=budget, kind=kind, epsilon=epsilon, unit=report.unit if report else "",
        delta=Decimal(repr(report.delta)) if report else None, mechanism=report.mechanism if report else "",
        parameters=parameters or {}, cost=cost.as_dict() if cost else None, job=job, submission=submission,
        actor=actor if actor is not None and actor.is_authenticated else None, reason=reason,
        composition_rule=amounts.rule, spent_after=amounts.spent, reserved_after=amounts.reserved,
        epsilon_limit_after=budget.epsilon_limit)


# --- L1 jobs -------------------------------------------------------------------------------------------------------

def job_privacy_cost(*, privacy_parameters: dict, partitions: int, teachers: int = 1) -> PrivacyCost:
    """The per-silo data-independent cost of an L1 FedKT job, or InvalidInput naming what is wrong."""
    try:
        return fedkt_l1_cost_from_parameters(privacy_parameters, partitions=partitions, teachers=teachers)
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The job's privacy parameters are not valid: {error}") from error


def _job_cost(job: Job) -> PrivacyCost:
    parameters = job.parameters or {}
    return job_privacy_cost(privacy_parameters=parameters.get("privacy") or {},
                            partitions=parameters.get("partitions", 1), teachers=parameters.get("teachers", 1))


def job_organisation_ids(job: Job) -> list[int]:
    return sorted(set(job.submissions.values_list("organisation_id", flat=True)))


def budget_reserve_for_job(*, job: Job, actor: User | None) -> None:
    """Reserve an L1 job's data-independent bound for every participating silo, or refuse without writing.

    Call inside the transaction that saved the job and its submissions. Sets ``job.privacy_bound``.
    Reserving again for the same job changes nothing.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    cost = _job_cost(job)
    with transaction.atomic():
        budgets = _budgets_locked(federation=job.federation, organisation_ids=job_organisation_ids(job))
        plans, shortfalls = [], []
        for budget in budgets:
            state = ledger_state(budget)
            if job.id in state.open_reservations or job.id in state.charged_jobs:
                continue
            amounts = budget_amounts(budget=budget, charged=state.charged,
                                     reserved=[*(c for c, _ in state.open_reservations.values()), cost])
            shortfall = _shortfall(budget, amounts)
            shortfalls += [shortfall] if shortfall else []
            plans.append((budget, amounts))
        if shortfalls:
            _refuse(job.federation, shortfalls, what=f"job #{job.id}", unit=cost.report.unit)
        for budget, amounts in plans:
            _write(budget, amounts, kind=EntryKind.RESERVE, epsilon=epsilon_decimal(cost.report.epsilon), cost=cost,
                   job=job, actor=actor, parameters=_job_ledger_parameters(job))
        job.privacy_bound = {**cost.report.as_dict(), "organisations": [budget.organisation_id for budget in budgets]}
        job.save(update_fields=["privacy_bound"])


def _job_ledger_parameters(job: Job, data_dependent: dict | None = None) -> dict:
    parameters = {"privacy": (job.parameters or {}).get("privacy"), "partitions": (job.parameters or {}).get("partitions"),
                  "job_kind": job.kind}
    if data_dependent:
        parameters["data_dependent"] = data_dependent
    return parameters


def _report_cost(report: dict) -> PrivacyCost:
    return fedkt_l1_cost(mechanism=report["mechanism"], gamma=report.get("gamma"), sigma=report.get("sigma"),
                         delta=report["delta"], n_queries=report["n_queries"], partitions=report["partitions"],
                         teachers=report.get("teachers") or 1)


def budget_charge_for_job(*, job: Job, privacy_report: dict) -> None:
    """Charge each participating silo the data-independent ε of what the job actually queried; idempotent.

    Call in the transaction that marks the job succeeded (or, after noise was drawn, failed). The
    data-dependent ε is recorded on the ledger line, never charged: it is itself private information and
    charging it would publish it through the remainder. A report without a data-independent bound releases.
    """
    if job.privacy_level != PrivacyLevel.L1:
        return
    independent = (privacy_report or {}).get("data_independent")
    if not independent:
        budget_release_for_job(job=job)
        return
    try:
        cost = _report_cost(independent)
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The job's privacy report is not valid: {error}") from error
    with transaction.atomic():
        for budget in _budgets_locked(federation=job.federation, organisation_ids=job_organisation_ids(job)):
            state = ledger_state(budget)
            if job.id in state.charged_jobs:
                continue
            state.open_reservations.pop(job.id, None)
            amounts = budget_amounts(budget=budget, charged=[*state.charged, cost],
                                     reserved=[c for c, _ in state.open_reservations.values()])
            shortfall = _shortfall(budget, amounts)
            if shortfall:
                _refuse(job.federation, [shortfall], what=f"job #{job.id}'s actual spend", unit=cost.report.unit)
            _write(budget, amounts, kind=EntryKind.CHARGE, epsilon=epsilon_decimal(cost.report.epsilon), cost=cost,
                   job=job, parameters=_job_ledger_parameters(job, privacy_report.get("data_dependent")))


def budget_release_for_job(*, job: Job) -> None:
    """Release a job's open reservations (failure or cancellation before any noise was drawn); idempotent."""
    with transaction.atomic():
        reserved_in = BudgetEntry.objects.filter(job=job, kind=EntryKind.RESERVE).values("budget_id")
        budgets = list(PrivacyBudget.objects.select_for_update(of=("self",)).select_related("organisation")
                       .filter(id__in=reserved_in).order_by("id"))
        for budget in budgets:
            state = ledger_state(budget)
            reservation = state.open_reservations.pop(job.id, None)
            if reservation is None:
                continue
            cost, entry = reservation
            amounts = budget_amounts(budget=budget, charged=state.charged,
                                     reserved=[c for c, _ in state.open_reservations.values()])
            _write(budget, amounts, kind=EntryKind.RELEASE, epsilon=entry.epsilon, cost=cost, job=job,
                   parameters=entry.parameters)


# --- L2 submissions ------------------------------------------------------------------------------------------------

def _submission_cost(submission: Submission) -> PrivacyCost:
    report = PrivacyReport(**submission.privacy_report)
    noise = noise_mechanism(mechanism=report.mechanism, gamma=report.gamma, sigma=report.sigma)
    curve = report.n_queries * noise.query_rdp(RENYI_ORDERS, vote_shift=1)  # n_queries counts q·s already
    return declared_cost(epsilon=float(submission.declared_epsilon), delta=report.delta, bound=report, bound_rdp=curve)


def budget_charge_for_submission(*, submission: Submission, actor: User | None) -> None:
    """Charge an L2 submission's declared ε to its silo's budget, or raise BudgetExceeded without writing.

    Call inside the transaction that stores the submission. Other levels cost nothing here.
    """
    if submission.privacy_level != PrivacyLevel.L2 or not submission.privacy_report:
        return
    cost = _submission_cost(submission)
    with transaction.atomic():
        [budget] = _budgets_locked(federation=submission.federation, organisation_ids=[submission.organisation_id])
        state = ledger_state(budget)
        if submission.id in state.charged_submissions:
            return
        amounts = budget_amounts(budget=budget, charged=[*state.charged, cost],
                                 reserved=[c for c, _ in state.open_reservations.values()])
        shortfall = _shortfall(budget, amounts)
        if shortfall:
            _refuse(submission.federation, [shortfall], what="this submission's declared ε", unit=cost.report.unit)
        _write(budget, amounts, kind=EntryKind.CHARGE, epsilon=epsilon_decimal(submission.declared_epsilon),
               cost=cost, submission=submission, actor=actor,
               parameters={"privacy": submission.privacy_parameters, "declared_epsilon": submission.declared_epsilon})


# --- refusals and limits -------------------------------------------------------------------------------------------

def budget_refusal_record(*, error: BudgetExceeded, actor: User | None, target=None, request=None,
                          details: dict | None = None) -> None:
    """Audit a refusal ("budget.refused"); call after the rolled-back block, so the event survives."""
    audit_record(action="budget.refused", outcome=AuditOutcome.REFUSED, actor=actor, target=target, request=request,
                 details={**error.details, "message": str(error), **(details or {})})


def _clean_limit(epsilon_limit) -> Decimal:
    try:
        limit = Decimal(str(epsilon_limit))
    except (InvalidOperation, ValueError) as error:
        raise InvalidInput(f"The ε limit must be a number, got {epsilon_limit!r}.") from error
    if not limit.is_finite() or limit < 0 or limit >= Decimal("1000000"):
        raise InvalidInput("The ε limit must be a number from 0 to 999999.999999.")
    return limit.quantize(EPSILON_QUANTUM, rounding=ROUND_CEILING)


def budget_limit_set(*, budget_id: int, epsilon_limit, reason: str, actor: User, request=None) -> PrivacyBudget:
    """An operator sets a silo's ε limit; refused (409) below what is already spent and reserved. Audited."""
    if not actor.is_operator:
        raise PermissionDenied("Only market operators can change privacy budget limits.")
    limit = _clean_limit(epsilon_limit)
    refusal = None
    with transaction.atomic():
        budget = PrivacyBudget.objects.select_for_update(of=("self",)).select_related("organisation", "federation").filter(
            id=budget_id).first()
        if budget is None:
            raise NotFound(f"There is no privacy budget #{budget_id}.")
        previous = budget.epsilon_limit
        details = {"federation": budget.federation.slug, "organisation": budget.organisation.name,
                   "previous_limit": str(previous), "requested_limit": str(limit), "reason": reason}
        if limit < budget.spent + budget.reserved:
            refusal = Conflict(f"{budget.organisation.name} has already spent and reserved ε = "
                               f"{budget.spent + budget.reserved} in '{budget.federation.slug}'; the limit cannot go "
                               f"below that (you asked for {limit}).")
        else:
            budget.epsilon_limit = limit
            _write(budget, BudgetAmounts(budget.spent, budget.reserved, budget.composition_rule),
                   kind=EntryKind.ADJUST, epsilon=limit - previous, cost=None, actor=actor, reason=reason,
                   parameters={"previous_limit": str(previous), "epsilon_limit": str(limit)})
            audit_record(action="budget.limit_changed", actor=actor, organisation=budget.organisation, target=budget,
                         request=request, details=details)
    if refusal is not None:
        audit_record(action="budget.limit_changed", outcome=AuditOutcome.REFUSED, actor=actor,
                     organisation=budget.organisation, target=budget, request=request,
                     details={**details, "message": str(refusal)})
        raise refusal
    return budget


# --- pricing and calibration (no writes) ---------------------------------------------------------------------------

def _views(*, federation: Federation, organisation_ids) -> list[tuple[PrivacyBudget, LedgerState]]:
    budgets_ensure(federation=federation, organisation_ids=organisation_ids)
    budgets = PrivacyBudget.objects.select_related("organisation").filter(
        federation=federation, organisation_id__in=list(organisation_ids)).order_by("id")
    found = [(budget, ledger_state(budget)) for budget in budgets]
    if len(found) != len(set(organisation_ids)):
        raise InvalidInput(f"Every silo priced must be a member of '{federation.slug}'.")
    return found


def _organisation_ids(organisations) -> list[int]:
    return sorted({getattr(organisation, "id", organisation) for organisation in organisations})


def budget_price_job(*, federation: Federation, organisations, privacy_parameters: dict, partitions: int,
                     teachers: int = 1) -> dict:
    """A quote for an L1 job: per silo, the ε it would need on top of its budget and whether it fits. Reserves nothing.

    ``organisations``: Organisation rows or ids. Returns ``{"cost": report, "fits": bool, "silos": [{organisation_id,
    organisation, budget_id, epsilon_limit, spent, reserved, remaining, needed, remaining_after, fits,
    composition_rule}]}``, amounts as decimal strings.
    """
    cost = job_privacy_cost(privacy_parameters=privacy_parameters, partitions=partitions, teachers=teachers)
    silos = []
    for budget, state in _views(federation=federation, organisation_ids=_organisation_ids(organisations)):
        amounts = budget_amounts(budget=budget, charged=state.charged,
                                 reserved=[*(c for c, _ in state.open_reservations.values()), cost])
        needed = amounts.committed - budget.spent - budget.reserved
        silos.append({"organisation_id": budget.organisation_id, "organisation": budget.organisation.name,
                      "budget_id": budget.id, "epsilon_limit": str(budget.epsilon_limit), "spent": str(budget.spent),
                      "reserved": str(budget.reserved), "remaining": str(budget.remaining), "needed": str(needed),
                      "remaining_after": str(budget.remaining - needed), "fits": amounts.committed <= budget.epsilon_limit,
                      "composition_rule": amounts.rule})
    return {"cost": cost.report.as_dict(), "fits": all(silo["fits"] for silo in silos), "silos": silos}


def budget_calibrate(*, federation: Federation, organisations, privacy_parameters: dict, partitions: int,
                     solve_for: str, teachers: int = 1) -> dict:
    """What fits every listed silo's remaining budget: the least noise (``solve_for="noise"``: largest γ or
    smallest σ at the given n_queries) or the most queries (``solve_for="queries"`` at the given γ or σ)."""
    views = [BudgetView(epsilon_limit=float(budget.epsilon_limit), delta=float(budget.delta),
                        committed=tuple(state.committed()))
             for budget, state in _views(federation=federation, organisation_ids=_organisation_ids(organisations))]
    mechanism, delta = privacy_parameters.get("mechanism"), privacy_parameters.get("delta")
    try:
        if solve_for == "noise":
            value = calibrate_noise(views, mechanism=mechanism, delta=delta, n_queries=privacy_parameters["n_queries"],
                                    partitions=partitions, teachers=teachers)
            parameter = "gamma" if mechanism == "laplace" else "sigma"
            solved = {**privacy_parameters, "gamma": None, "sigma": None, parameter: value} if value else None
        elif solve_for == "queries":
            value = calibrate_queries(views, mechanism=mechanism, gamma=privacy_parameters.get("gamma"),
                                      sigma=privacy_parameters.get("sigma"), delta=delta, partitions=partitions,
                                      teachers=teachers)
            parameter, solved = "n_queries", {**privacy_parameters, "n_queries": value}
        else:
            raise InvalidInput("Calibrate for 'noise' (the least noise that fits) or 'queries' (the most queries).")
    except (TypeError, ValueError, KeyError) as error:
        raise InvalidInput(f"The privacy parameters are not valid: {error}") from error
    price = (budget_price_job(federation=federation, organisations=organisations, privacy_parameters=solved,
                              partitions=partitions, teachers=teachers) if solved else None)
    return {"solve_for": solve_for, "parameter": parameter, "value": value if value is None or math.isfinite(value)
            else None, "privacy": solved, "price": price}
