"""The L1 calibration policy: the noise and query count of a job whose request leaves them to the market, checked
against the budgets it is calibrated to and priced (issue 41 item 2: the market asks this one function and stores
what it returns; it no longer holds the policy).

- A Gaussian (GNMax) or Confident-GNMax job that names no σ: σ in proportion to the most votes a query holds and the
  most queries that fit (:func:`workers.privacy.costs.calibrate_gnmax`), or the least σ that fits the query it names
  (:func:`workers.privacy.costs.calibrate_noise`); never more than :data:`MAX_GNMAX_NOISE_RATIO` × the votes.
- A Laplace job (or a Gaussian one that names σ) that names no query: the most rows that fit
  (:func:`workers.privacy.costs.calibrate_queries`), at most its default query.

Every ε here is in the job's unit (``privacy.unit``: party-level, one silo's data, unless the job protects one
record), with the budgets' δ, accounted in Rényi DP by the job kind's own price (``kind.l1_cost``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from workers.privacy.costs import (
    BudgetView,
    PrivacyCost,
    calibrate_check_noise,
    calibrate_gnmax,
    calibrate_noise,
    calibrate_queries,
    compose_costs,
)
from workers.privacy.settings import (
    DEFAULT_GNMAX_NOISE_RATIO,
    PrivacySettings,
    confident_resolved,
    mechanism_named,
    names_sigma,
    privacy_unit,
)

#: The most noise a calibrated GNMax job may add, in proportion to the most votes a query holds: at σ = 5 × the
#: votes even a unanimous two-class query is answered wrongly with probability Φ(−1/(5√2)) ≈ 0.44, a label little
#: better than a coin, so a job that would need more is refused rather than spending budget on a model of noise.
MAX_GNMAX_NOISE_RATIO = 5.0


class PricedKind(Protocol):
    """What a plan needs of a job kind that accepts server noise (a :class:`workers.algorithms.registry.
    FusionAlgorithm`): the votes one submission moves per query, and the ε its noise costs a silo."""

    def votes_per_submission(self, settings: Mapping) -> int: ...

    def l1_cost(
        self,
        settings: Mapping,
        *,
        privacy: PrivacySettings | Mapping,
        vote_shift: int | None = None,
    ) -> PrivacyCost: ...


@dataclass(frozen=True)
class L1Plan:
    """A checked, priced L1 plan: the resolved noise (``privacy``, whose ``n_queries`` is the rows the job queries)
    and its data-independent party-level ``cost`` for one silo of the budgets it was calibrated to."""

    privacy: PrivacySettings
    cost: PrivacyCost

    @property
    def n_queries(self) -> int:
        return self.privacy.n_queries


@dataclass(frozen=True)
class PlanRequest:
    """What an L1 job asks of the plan.

    ``settings``: the kind's validated parameters; ``given_privacy``: the request's ``privacy`` object;
    ``defaults``: the federation's default parameters; ``delta``: its δ; ``n_queries``: the rows the validated
    settings query; ``query_named``: whether the request named its query (then it is never lowered);
    ``takes_query``: whether the kind queries rows at all; ``most_votes``: the most votes one query holds;
    ``min_queries``: the fewest rows a model trains on."""

    settings: Mapping
    given_privacy: Mapping
    defaults: Mapping
    delta: float
    n_queries: int
    query_named: bool
    takes_query: bool
    most_votes: int
    min_queries: int


def l1_plan(
    *,
    kind: PricedKind,
    request: PlanRequest,
    budgets: Sequence[BudgetView],
    budgets_named: str,
) -> L1Plan:
    """The plan of an L1 job calibrated to ``budgets`` (each silo's ε limit, δ and committed costs; their vote shift
    is set here from the kind), or a ValueError whose sentence says what would fit (``budgets_named`` says in words
    what the budgets are, e.g. "a new member's share of this federation's default limit")."""
    shifted = [
        replace(view, vote_shift=kind.votes_per_submission(request.settings)) for view in budgets
    ]

    def price(at: PrivacySettings, shift: int | None) -> PrivacyCost:
        return kind.l1_cost(request.settings, privacy=at, vote_shift=shift)

    mechanism = mechanism_named(request.given_privacy, defaults=request.defaults)
    sigma, count = None, request.n_queries
    if mechanism in ("gaussian", "confident_gnmax") and not names_sigma(
        request.given_privacy, defaults=request.defaults
    ):
        confident = (
            confident_resolved(request.given_privacy, most_votes=request.most_votes)
            if mechanism == "confident_gnmax"
            else None
        )
        sigma, count = _gnmax_calibrated(
            shifted, request=request, confident=confident, price=price, named=budgets_named
        )
    elif request.takes_query and not request.query_named:
        count = min(count, max(1, _fitting_queries(shifted, request=request, price=price)))
    privacy = _resolved(request, n_queries=count, sigma=sigma)
    return L1Plan(privacy=privacy, cost=price(privacy, shifted[0].vote_shift))


def _resolved(request: PlanRequest, *, n_queries: int, sigma: float | None) -> PrivacySettings:
    return PrivacySettings.resolved(
        request.given_privacy,
        defaults=request.defaults,
        default_delta=request.delta,
        n_queries=n_queries,
        sigma=sigma,
        most_votes=request.most_votes,
    )


def _fitting_queries(budgets: Sequence[BudgetView], *, request: PlanRequest, price) -> int:
    """The most rows (at most the default query) whose data-independent ε fits every budget."""
    return calibrate_queries(
        budgets,
        privacy=_resolved(request, n_queries=0, sigma=None),
        price=price,
        max_queries=request.n_queries,
    )


def _gnmax_calibrated(
    budgets: Sequence[BudgetView],
    *,
    request: PlanRequest,
    confident: Mapping | None,
    price,
    named: str,
) -> tuple[float, int]:
    """σ and the query count of a Gaussian job that names no σ (see the module's docstring)."""
    most_sigma = MAX_GNMAX_NOISE_RATIO * request.most_votes
    mechanism = "gaussian" if confident is None else "confident_gnmax"
    if request.query_named:
        privacy = PrivacySettings(
            mechanism=mechanism,
            delta=request.delta,
            n_queries=request.n_queries,
            unit=privacy_unit(request.given_privacy),
            **(confident or {}),
        )
        calibrated = calibrate_noise(budgets, privacy=privacy, price=price)
        if calibrated is None or calibrated > most_sigma:
            raise _nothing_fits(
                budgets, replace(privacy, sigma=most_sigma), price, request.most_votes, named
            )
        return calibrated, request.n_queries
    solved = calibrate_gnmax(
        budgets,
        total_votes=request.most_votes,
        noise_ratio=DEFAULT_GNMAX_NOISE_RATIO,
        delta=request.delta,
        price=price,
        min_queries=request.min_queries,
        max_queries=request.n_queries,
        confident=confident,
    )
    if solved is None or solved["sigma"] > most_sigma:
        fewest = PrivacySettings(
            mechanism=mechanism,
            sigma=most_sigma,
            delta=request.delta,
            n_queries=min(request.min_queries, request.n_queries),
            unit=privacy_unit(request.given_privacy),
            **(confident or {}),
        )
        raise _nothing_fits(budgets, fewest, price, request.most_votes, named)
    return solved["sigma"], solved["n_queries"]


def _rounded_up(value: float) -> float:
    """``value`` rounded up to three significant digits, so that a number a refusal names is itself accepted."""
    scale = 10.0 ** (math.floor(math.log10(value)) - 2)
    return math.ceil(value / scale - 1e-9) * scale


def _nothing_fits(
    budgets: Sequence[BudgetView], privacy: PrivacySettings, price, most_votes: int, named: str
) -> ValueError:
    """The refusal of a calibrated GNMax job that does not fit even at the most noise a model can learn from
    (``privacy.sigma``): a Confident-GNMax job whose checks are what does not fit is told the ``sigma_threshold``
    that would fit; any other, the budget and the fewest rows a model trains on."""
    where = (
        f"{named} (ε {budgets[0].epsilon_limit:g}, {privacy.unit_label}, δ = {budgets[0].delta:g}) does not cover "
        f"{privacy.n_queries} queried public rows even at σ = {privacy.sigma:g} votes ({MAX_GNMAX_NOISE_RATIO:g} "
        f"× the {most_votes} votes a query holds; more noise would leave a model of pure noise)"
    )
    if privacy.mechanism == "confident_gnmax":
        check = calibrate_check_noise(budgets, privacy=privacy, price=price)
        if check is not None:
            return ValueError(
                f"This Confident-GNMax job names no σ and its checks do not fit: {where}. Name a "
                f'"sigma_threshold" of at least {_rounded_up(check):g} votes (or a σ and a query yourself), '
                "or ask an operator for a larger default limit."
            )
    return ValueError(
        f"This L1 job names no σ and no calibrated noise fits: {where}. Name a σ and a query yourself, or ask an "
        "operator for a larger default limit."
    )


#: The advisor's grid (issue 40 item 4): the units, mechanisms and query counts (in proportion to the job's own)
#: whose noise it calibrates to every member's remaining budget and whose models the pre-flight estimate scores.
#: A unit is one more dimension; the advisor prices party-level settings only (a record-level candidate would need
#: every member's disjoint-partition declaration, the federation's consent and simulated votes per student, which the
#: estimate does not draw yet). Query counts go down only: a job's default query is already the most that fits the
#: same share of a budget, and fewer rows take less noise each.
ADVISED_UNITS = ("party-level",)
ADVISED_MECHANISMS = ("gaussian", "laplace")
ADVISED_QUERY_SCALES = (0.1, 1 / 3, 1.0)


@dataclass(frozen=True)
class AdvisedCandidate:
    """One setting the advisor prices: its protected ``unit``, ``mechanism`` and ``n_queries``, the noise that fits
    every budget (``privacy``, with ``n_queries``) and its data-independent ``cost`` for a silo with one submission."""

    unit: str
    privacy: PrivacySettings
    cost: PrivacyCost

    def as_dict(self) -> dict:
        return {
            "unit": self.unit,
            "mechanism": self.privacy.mechanism,
            "n_queries": self.privacy.n_queries,
            "privacy": self.privacy.as_dict(),
            "epsilon": self.cost.report.epsilon,
            "delta": self.cost.report.delta,
        }


def budgets_within_share(budgets: Sequence[BudgetView], *, share: float) -> list[BudgetView]:
    """``budgets`` whose limits leave the rest for later jobs: each silo's ε already spent (its committed costs
    composed at its δ) plus ``share`` (0 < share ≤ 1) of what it has left, so that an advised setting never spends
    a member's whole remainder."""
    limited = []
    for view in budgets:
        spent = compose_costs(view.committed, delta=view.delta).epsilon if view.committed else 0.0
        remaining = max(0.0, view.epsilon_limit - spent)
        limited.append(replace(view, epsilon_limit=spent + share * remaining))
    return limited


def advised_query_counts(*, n_queries: int, n_public: int, min_queries: int) -> list[int]:
    """The query counts the advisor tries: :data:`ADVISED_QUERY_SCALES` × the job's ``n_queries``, each at least
    ``min_queries`` and at most ``n_public``, without repeats, smallest first."""
    counts = {
        min(n_public, max(min_queries, round(n_queries * scale))) for scale in ADVISED_QUERY_SCALES
    }
    return sorted(counts)


def advised_candidates(
    *,
    kind: PricedKind,
    settings: Mapping,
    budgets: Sequence[BudgetView],
    delta: float,
    query_counts: Sequence[int],
    most_votes: int,
) -> list[AdvisedCandidate]:
    """Every candidate of the grid (:data:`ADVISED_UNITS` × :data:`ADVISED_MECHANISMS` × ``query_counts``) whose
    least noise fits every one of ``budgets`` (each silo's remaining budget, with its vote shift) and leaves a
    model that can learn: σ (or the Laplace scale 1/γ) at most :data:`MAX_GNMAX_NOISE_RATIO` × the ``most_votes``
    a query holds. Party-level ε, accounted by the kind's price at ``delta``."""

    def price(at: PrivacySettings, shift: int | None) -> PrivacyCost:
        return kind.l1_cost(settings, privacy=at, vote_shift=shift)

    most_noise = MAX_GNMAX_NOISE_RATIO * most_votes
    candidates = []
    for unit in ADVISED_UNITS:
        for mechanism in ADVISED_MECHANISMS:
            for count in query_counts:
                privacy = PrivacySettings(mechanism=mechanism, delta=delta, n_queries=count)
                noise = calibrate_noise(budgets, privacy=privacy, price=price)
                scale = None if not noise else (1 / noise if mechanism == "laplace" else noise)
                if scale is None or not math.isfinite(scale) or scale > most_noise:
                    continue
                fitted = (
                    replace(privacy, gamma=noise)
                    if mechanism == "laplace"
                    else replace(privacy, sigma=noise)
                )
                candidates.append(
                    AdvisedCandidate(unit=unit, privacy=fitted, cost=price(fitted, None))
                )
    return candidates
