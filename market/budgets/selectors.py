"""Reads of privacy budgets and their ledger, with who may see what.

Operators see every silo's budget in a federation; a member silo sees only its own (another silo's budget
is "not found", not "forbidden", so its existence is not confirmed). Data-dependent ε recorded on ledger
lines is shown outside the operator's views only when the federation publishes it.
"""

import csv
import io
from datetime import datetime, time
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from market.accounts.models import User
from market.audit.models import AuditEvent
from market.budgets.ledger import (
    BudgetExceeded,
    budget_amounts_by_unit,
    budgets_ensure,
    ledger_state,
)
from market.budgets.models import BudgetEntry, EntryKind, PrivacyBudget
from market.budgets.spending import spender_named
from market.errors import InvalidInput, NotFound
from market.federations.models import Federation
from market.federations.selectors import federation_require_member
from market.federations.visibility import visibility_for
from workers.privacy.costs import Composition, compose_costs, rule_description
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL

#: Budgets at or past this fraction of their limit (spent + reserved) are flagged on the dashboard.
WARNING_FRACTION = 0.8


def budget_list(*, federation: Federation, user: User) -> QuerySet[PrivacyBudget]:
    """The budgets the user may see in a federation (created for members who have none yet)."""
    federation_require_member(federation=federation, user=user)
    budgets_ensure(federation=federation)
    budgets = PrivacyBudget.objects.filter(federation=federation).select_related(
        "organisation", "federation"
    )
    if not user.is_operator:
        budgets = budgets.filter(organisation_id=user.organisation_id)
    return budgets.order_by("organisation__name")


def budget_get(*, budget_id: int, user: User) -> PrivacyBudget:
    budget = (
        PrivacyBudget.objects.select_related("organisation", "federation")
        .filter(id=budget_id)
        .first()
    )
    if budget is None or not (user.is_operator or budget.organisation_id == user.organisation_id):
        raise NotFound(f"There is no privacy budget #{budget_id}.")
    return budget


def budget_composition(budget: PrivacyBudget) -> Composition:
    """The composition of everything spent and reserved. Its δ: the budget's δ, plus the own δ of every cost composed
    additively (an L2 submission charged as declared brings its declared δ along; Dwork and Roth 2014, Thm. 3.16).
    Its unit: party-level only when every cost is, else example-level."""
    return compose_costs(ledger_state(budget).committed(), delta=float(budget.delta))


#: What the unit of a budget's total means, by unit (the API's ``unit_note``, the dashboard's footnote).
UNIT_NOTES = {
    PARTY_LEVEL: "Party-level ε: every spend so far protects the silo's whole data (party-level L1 jobs).",
    EXAMPLE_LEVEL: "Example-level ε: it protects any one record of the silo's data. Party-level spends (L1 jobs) "
    "count at their own ε, since a party-level guarantee implies the same ε at example level; example-level "
    "spends (L2 submissions, FAug generators, record-level L1 jobs) give no party-level guarantee, so no "
    "party-level total covers them.",
}


def budget_summary(budget: PrivacyBudget) -> dict:
    """A budget's figures as the API and the dashboard show them (ε as decimal strings). ``delta`` is the δ at which
    the spend is converted; ``composed_delta`` the δ the whole spend holds at (larger when declared δs add).
    ``unit`` labels the totals (spent, reserved, remaining); ``by_unit`` composes each unit's spends alone."""
    composition = budget_composition(budget)
    return {
        "id": budget.id,
        "federation": budget.federation.slug,
        "organisation_id": budget.organisation_id,
        "organisation": budget.organisation.name,
        "epsilon_limit": str(budget.epsilon_limit),
        "delta": format(budget.delta.normalize(), "f"),
        "composed_delta": format(Decimal(f"{composition.delta:.12g}").normalize(), "f"),
        "spent": str(budget.spent),
        "reserved": str(budget.reserved),
        "remaining": str(budget.remaining),
        "unit": composition.unit,
        "unit_note": UNIT_NOTES[composition.unit],
        "by_unit": [
            {"unit": name, "spent": str(amounts.spent), "reserved": str(amounts.reserved)}
            for name, amounts in budget_amounts_by_unit(budget).items()
        ],
        "used_fraction": round(budget.used_fraction, 6),
        "warning": budget.used_fraction >= WARNING_FRACTION,
        "composition_rule": budget.composition_rule,
        "composition": rule_description(budget.composition_rule),
        "updated_at": budget.updated_at,
    }


def _moment(text: str, *, end_of_day: bool):
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise InvalidInput(f"'{text}' is not a date (YYYY-MM-DD) or date and time (ISO 8601).")
        moment = datetime.combine(day, time.max if end_of_day else time.min)
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def _integer(text, name: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"The {name} filter must be a number, got '{text}'.") from error


def budget_ledger(
    *, federation: Federation, user: User, silo=None, job=None, kind=None, since=None, until=None
) -> QuerySet[BudgetEntry]:
    """Ledger lines of the budgets the user may see, newest first, filtered by silo (organisation id), job id,
    kind and date (``since`` and ``until`` inclusive; a bare date covers the whole day)."""
    federation_require_member(federation=federation, user=user)
    entries = BudgetEntry.objects.filter(budget__federation=federation).select_related(
        "budget__organisation", "actor"
    )
    if not user.is_operator:
        entries = entries.filter(budget__organisation_id=user.organisation_id)
    if silo not in (None, ""):
        entries = entries.filter(budget__organisation_id=_integer(silo, "silo"))
    if job not in (None, ""):
        entries = entries.filter(spender_kind="job", spender_id=_integer(job, "job"))
    if kind not in (None, ""):
        if kind not in EntryKind.values:
            raise InvalidInput(
                f"The kind filter must be one of {', '.join(EntryKind.values)}, got '{kind}'."
            )
        entries = entries.filter(kind=kind)
    if since:
        entries = entries.filter(created_at__gte=_moment(since, end_of_day=False))
    if until:
        entries = entries.filter(created_at__lte=_moment(until, end_of_day=True))
    return entries.order_by("-created_at", "-id")


def price_quote_visible(*, quote: dict, user: User) -> dict:
    """A price quote (:func:`market.budgets.pricing.budget_price_job`) as the user may see it: operators all of
    it; anyone else their own silo's line, and whether the job fits that budget only (``None`` without one).
    Whether it fits every silo's budget would let anyone binary-search the smallest remainder."""
    if user.is_operator:
        return quote
    own = [silo for silo in quote["silos"] if silo["organisation_id"] == user.organisation_id]
    return {**quote, "silos": own, "fits": all(silo["fits"] for silo in own) if own else None}


def budget_refusal_visible(*, error: BudgetExceeded, user: User) -> BudgetExceeded:
    """A refused spend as the person who asked may read it: operators the sentence naming the silo short of
    budget and its remainder; anyone else whether the spend fits, and their own silo's remainder only."""
    if user.is_operator:
        return error
    own = [
        silo
        for silo in error.details.get("silos", [])
        if silo.get("organisation_id") == user.organisation_id
    ]
    federation = error.details.get("federation", "")
    if own:
        sentence = (
            f"Your privacy budget in '{federation}' has ε = {own[0]['remaining']} left, but this needs "
            f"ε = {own[0]['needed']} more."
        )
    else:
        sentence = f"This would exceed a participating silo's privacy budget in '{federation}'."
    return BudgetExceeded(
        f"{sentence} Add more noise, query fewer public rows, or ask an operator.",
        details={"federation": federation, "silos": own},
    )


def entry_parameters_for(entry: BudgetEntry, *, user: User, federation: Federation) -> dict:
    """A line's parameters, without the data-dependent ε unless the user is an operator or the federation publishes it."""
    parameters = dict(entry.parameters or {})
    if (
        "data_dependent" in parameters
        and not visibility_for(user=user, federation=federation).data_dependent_epsilon
    ):
        parameters.pop("data_dependent")
    return parameters


#: The spender kinds that had a column of their own before the generic reference: their "<kind>_id" stays in every
#: answer for the clients that read it. A new kind of spender is named by ``spender_kind`` and ``spender_id`` only.
LEGACY_SPENDER_FIELDS = ("job", "submission", "augmentation")


def entry_summary(entry: BudgetEntry, *, user: User, federation: Federation) -> dict:
    spender, spender_url = (
        spender_named(entry.spender_kind, entry.spender_id) if entry.spender_kind else ("", "")
    )
    return {
        "id": entry.id,
        "budget_id": entry.budget_id,
        "organisation_id": entry.budget.organisation_id,
        "organisation": entry.budget.organisation.name,
        "kind": entry.kind,
        "epsilon": str(entry.epsilon),
        "unit": entry.unit,
        "delta": format(entry.delta.normalize(), "f") if entry.delta is not None else None,
        "mechanism": entry.mechanism,
        "parameters": entry_parameters_for(entry, user=user, federation=federation),
        "spender_kind": entry.spender_kind,
        "spender_id": entry.spender_id,
        "spender": spender or None,
        "spender_url": spender_url or None,
        **{f"{kind}_id": entry.spender_id_of(kind) for kind in LEGACY_SPENDER_FIELDS},
        "actor": entry.actor.username if entry.actor else None,
        "reason": entry.reason,
        "composition_rule": entry.composition_rule,
        "spent_after": str(entry.spent_after),
        "reserved_after": str(entry.reserved_after),
        "epsilon_limit_after": str(entry.epsilon_limit_after),
        "created_at": entry.created_at,
    }


CSV_COLUMNS = [
    "id",
    "created_at",
    "organisation",
    "kind",
    "epsilon",
    "unit",
    "delta",
    "mechanism",
    "spender",
    "job_id",
    "submission_id",
    "augmentation_id",
    "actor",
    "reason",
    "composition_rule",
    "spent_after",
    "reserved_after",
    "epsilon_limit_after",
]


def ledger_csv(entries, *, user: User, federation: Federation) -> str:
    """The ledger lines as CSV, one row per line, the columns of :data:`CSV_COLUMNS`."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for entry in entries:
        row = entry_summary(entry, user=user, federation=federation)
        row["created_at"] = row["created_at"].isoformat()
        # A spreadsheet would run a cell that starts with = + - @ as a formula; the reason is free text.
        if row["reason"][:1] in ("=", "+", "-", "@"):
            row["reason"] = "'" + row["reason"]
        writer.writerow(row)
    return buffer.getvalue()


def budget_timeline(*, federation: Federation, user: User) -> dict:
    """Per silo, the spent and reserved ε after every ledger line, oldest first (for the dashboard's timeline)."""
    series: dict[str, list] = {}
    for entry in budget_ledger(federation=federation, user=user).order_by("created_at", "id"):
        series.setdefault(entry.budget.organisation.name, []).append(
            {
                "at": entry.created_at.isoformat(),
                "kind": entry.kind,
                "spent": float(entry.spent_after),
                "reserved": float(entry.reserved_after),
                "limit": float(entry.epsilon_limit_after),
            }
        )
    return series


def budget_refusals(*, federation: Federation, user: User, limit: int = 50) -> list[dict]:
    """Recent refused spends ("budget.refused" audit events) in the federation, newest first; a silo sees those
    that named its own budget or that it asked for."""
    events = (
        AuditEvent.objects.filter(action="budget.refused", details__federation=federation.slug)
        .select_related("actor")
        .order_by("-id")[:limit]
    )
    refusals = []
    for event in events:
        silo_ids = {silo.get("organisation_id") for silo in event.details.get("silos", [])}
        if (
            user.is_operator
            or user.organisation_id in silo_ids
            or (event.actor_id is not None and event.actor_id == user.id)
        ):
            # the recorded sentence names the first silo short of budget, which may be another silo
            refused = BudgetExceeded(event.details.get("message", ""), details=event.details)
            refusals.append(
                {
                    "at": event.created_at,
                    "message": str(budget_refusal_visible(error=refused, user=user)),
                    "actor": event.actor.username if event.actor else None,
                }
            )
    return refusals
