"""What a job or a submission costs a silo's privacy budget, how costs compose, and what still fits.

A budget holds a list of :class:`PrivacyCost` (charged or reserved). Its spend is
:func:`compose_costs` of that list at the budget's δ:

* **RDP rule** — costs that carry a Rényi curve (every L1 FedKT job: its data-independent
  curve is known before it runs) are composed by adding their curves order by order
  (Mironov 2017, *Rényi Differential Privacy*, Prop. 1) and converting the sum once, at the
  budget's δ (:func:`workers.privacy.rdp.epsilon_from_rdp`). k jobs therefore cost less than
  k times one job: the remainder reflects the better-than-additive composition.
* **Additive rule** — costs known only as a declared (ε, δ) pair (an L2 submission whose
  declared ε is larger than what its parameters imply) add up by basic composition:
  ε and δ both add (Dwork and Roth 2014, Thm. 3.16).
* A budget mixing both has ε = ε_RDP(δ_budget) + Σ ε_additive and
  δ = δ_budget + Σ δ_additive; :class:`Composition` records which rule applied.

Units: a party-level guarantee (L1: neighbours differ in one silo's whole data) implies the
same example-level guarantee, so party-level and example-level costs of one silo compose
into an example-level bound; the composition says "party-level" only when every cost is.
An example-level cost (an L2 submission, a record-level L1 job) never composes into a
party-level claim: it bounds what one record's change shows, not what the silo's whole data
shows (a silo's data moves all of its students' votes), so the ledger's composed ε is then
example-level only, and no party-level remainder is claimed for it.

Pure core: numpy and :mod:`workers.privacy` only.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from workers.privacy.accounting import server_noise_privacy_bound
from workers.privacy.rdp import (
    RENYI_ORDERS,
    conversion_epsilons,
    epsilon_from_rdp,
    validate_delta,
)
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL, PrivacyReport
from workers.privacy.settings import PrivacySettings, noise_mechanism

RULE_RDP = "rdp"
RULE_ADDITIVE = "additive"
RULE_RDP_AND_ADDITIVE = "rdp+additive"
RULE_NONE = "none"

#: Relative slack when deciding that a declared ε equals the ε its parameters imply.
_DECLARED_MATCH_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PrivacyCost:
    """One spend of privacy, labelled.

    Attributes
    ----------
    report : PrivacyReport
        The (ε, δ) of this spend on its own (data-independent).
    rdp : tuple of float or None
        Its Rényi curve D_α in nats at :data:`~workers.privacy.rdp.RENYI_ORDERS`, or None when
        only the (ε, δ) pair is known (then it composes additively).
    """

    report: PrivacyReport
    rdp: tuple[float, ...] | None = field(default=None, repr=False)

    def as_dict(self) -> dict:
        """JSON-ready: the report's fields, and the curve with its orders (or null)."""
        curve = (
            None if self.rdp is None else {"orders": RENYI_ORDERS.tolist(), "rdp": list(self.rdp)}
        )
        return {"report": self.report.as_dict(), "rdp": curve}

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyCost":
        """The inverse of :meth:`as_dict`. A curve stored on another order grid (the grid changed since) is
        dropped: the cost then composes additively with its own (ε, δ), which is looser but still sound."""
        curve = data.get("rdp")
        rdp = None
        if curve is not None and np.array_equal(
            np.asarray(curve["orders"], dtype=float), RENYI_ORDERS
        ):
            rdp = tuple(float(value) for value in curve["rdp"])
        return cls(report=PrivacyReport(**data["report"]), rdp=rdp)


@dataclass(frozen=True)
class Composition:
    """The guarantee of several costs together.

    Attributes
    ----------
    epsilon, delta : float
        The composed guarantee (δ includes every additive cost's own δ).
    rule : str
        "rdp", "additive", "rdp+additive", or "none" (no costs).
    unit : str
        "party-level" when every cost is; otherwise "example-level".
    rdp_epsilon, additive_epsilon : float
        The two parts of ε.
    order : float or None
        Rényi order at which the RDP part was attained.
    """

    epsilon: float
    delta: float
    rule: str
    unit: str
    rdp_epsilon: float
    additive_epsilon: float
    order: float | None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def fedkt_l1_cost(
    *,
    mechanism: str,
    gamma: float | None,
    sigma: float | None,
    delta: float,
    n_queries: int,
    partitions: int,
    teachers: int = 1,
    vote_shift: int | None = None,
    threshold: float | None = None,
    sigma_threshold: float | None = None,
    unit: str = PARTY_LEVEL,
) -> PrivacyCost:
    """The data-independent party-level (or record-level) cost of one FedKT-L1 job to one participating silo.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian", "confident_gnmax"}
    gamma, sigma : float or None
        The noise parameter of the mechanism (the other is None; σ₂ of Confident-GNMax's answers).
    threshold, sigma_threshold : float or None
        Confident-GNMax only: T and σ₁; each of its ``n_queries`` candidates is charged its check and its answer.
    delta : float
        δ of the job's own report (the budget converts the curve at its own δ).
    n_queries : int
        Public rows the server queries.
    partitions : int
        FedKT's s: one consistent submission moves s votes.
    teachers : int
        FedKT's t; recorded only, the bound does not depend on it.
    vote_shift : int, optional
        Votes this silo's data can move per query, its sensitivity: s × its submissions in the
        job (:func:`~workers.privacy.accounting.party_vote_shifts`), or s × its largest vote
        weight in a weighted vote. Default s. Charging s to a silo that moves more under-charges it. Record-level:
        the silo's submissions in the job (one record moves one student's vote in each).
    unit : {"party-level", "example-level"}
        What the cost protects (:func:`~workers.privacy.accounting.server_noise_privacy_bound`).

    Returns
    -------
    PrivacyCost
        Its report is :func:`~workers.privacy.accounting.server_noise_privacy_bound`; its curve is
        n_queries times one query's curve at that vote shift.
    """
    noise = noise_mechanism(
        mechanism=mechanism,
        gamma=gamma,
        sigma=sigma,
        threshold=threshold,
        sigma_threshold=sigma_threshold,
    )
    report = server_noise_privacy_bound(
        mechanism=noise,
        n_queries=n_queries,
        partitions=partitions,
        teachers=teachers,
        delta=delta,
        vote_shift=vote_shift,
        unit=unit,
    )
    curve = n_queries * noise.query_rdp(RENYI_ORDERS, vote_shift=report.vote_shift)
    return PrivacyCost(report=report, rdp=tuple(float(value) for value in curve))


def fedkt_l1_cost_from_parameters(
    privacy: PrivacySettings | Mapping,
    *,
    partitions: int,
    teachers: int = 1,
    vote_shift: int | None = None,
) -> PrivacyCost:
    """:func:`fedkt_l1_cost` of a job's :class:`~workers.privacy.settings.PrivacySettings`, or of their stored
    shape (``parameters["privacy"]``, or a stored report of the noise: the same keys), in their unit."""
    settings = PrivacySettings.of(privacy)
    return fedkt_l1_cost(
        mechanism=settings.mechanism,
        gamma=settings.gamma,
        sigma=settings.sigma,
        delta=settings.delta,
        n_queries=settings.n_queries,
        partitions=partitions,
        teachers=teachers,
        vote_shift=vote_shift,
        threshold=settings.threshold,
        sigma_threshold=settings.sigma_threshold,
        unit=settings.unit_label,
    )


def declared_cost(
    *,
    epsilon: float,
    delta: float,
    unit: str = EXAMPLE_LEVEL,
    bound: PrivacyReport | None = None,
    bound_rdp: Sequence[float] | None = None,
) -> PrivacyCost:
    """The cost of an L2 submission: the silo's declared example-level ε.

    The declared ε composes through RDP only when it *is* the bound its parameters imply
    (``bound.epsilon`` equals ``epsilon`` and the curve is given); a silo that declares more
    than its parameters imply is charged what it declared, composed additively.
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"A declared ε must be positive and finite, got {epsilon!r}.")
    validate_delta(delta)
    if (
        bound is not None
        and bound_rdp is not None
        and math.isclose(bound.epsilon, epsilon, rel_tol=_DECLARED_MATCH_TOLERANCE)
        and math.isclose(bound.delta, delta, rel_tol=_DECLARED_MATCH_TOLERANCE)
    ):
        return PrivacyCost(report=bound, rdp=tuple(float(value) for value in bound_rdp))
    report = PrivacyReport(
        epsilon=float(epsilon),
        delta=float(delta),
        unit=unit,
        mechanism=bound.mechanism if bound else "declared",
        gamma=bound.gamma if bound else None,
        sigma=bound.sigma if bound else None,
        n_queries=bound.n_queries if bound else 0,
        partitions=bound.partitions if bound else 0,
        teachers=bound.teachers if bound else 0,
        data_dependent=False,
        order=0.0,
        vote_shift=bound.vote_shift if bound else None,
    )
    return PrivacyCost(report=report, rdp=None)


def declared_cost_at(
    *, epsilon: float, delta: float, bound: PrivacyReport, bound_rdp: Sequence[float]
) -> PrivacyCost:
    """The cost of a declaration whose Rényi curve the market recomputes (DP-SGD) to a budget of δ ``delta``.

    The parameters' curve, raised by the same amount at every order where needed so that it spends at least the
    declared ε at the budget's δ: the charge is the larger of the declared ε and what the parameters spend at the
    budget's δ, whatever δ was declared, and it composes through RDP at the budget's δ without adding a δ of its
    own. A curve raised at every order stays above the mechanism's, so the composition stays sound.
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"A declared ε must be positive and finite, got {epsilon!r}.")
    validate_delta(delta)
    curve = np.asarray(bound_rdp, dtype=float)
    spent, order = epsilon_from_rdp(RENYI_ORDERS, curve, delta=delta)
    if spent < epsilon:
        # Every order's conversion grows one for one with the raise; raised by at least −log(1 − δ²), the
        # conversion's (0, δ) clause holds at no order, so the raised curve spends at least ε at δ.
        unclamped = float(np.min(conversion_epsilons(RENYI_ORDERS, curve, delta=delta)))
        raise_by = max(epsilon - unclamped, -math.log1p(-(delta**2))) * (1 + 1e-9)
        curve = curve + raise_by
        spent, order = epsilon_from_rdp(RENYI_ORDERS, curve, delta=delta)
    report = replace(
        bound, epsilon=max(float(spent), float(epsilon)), delta=float(delta), order=float(order)
    )
    return PrivacyCost(report=report, rdp=tuple(float(value) for value in curve))


def compose_costs(costs: Sequence[PrivacyCost], *, delta: float) -> Composition:
    """Compose costs at δ: curves add and convert once, the rest adds (see the module docstring).

    Parameters
    ----------
    costs : sequence of PrivacyCost
    delta : float
        The budget's δ, at which the summed curve is converted.

    Returns
    -------
    Composition
    """
    validate_delta(delta)
    curves = [np.asarray(cost.rdp) for cost in costs if cost.rdp is not None]
    declared = [cost.report for cost in costs if cost.rdp is None]
    rdp_epsilon, order = 0.0, None
    if curves:
        rdp_epsilon, order = epsilon_from_rdp(RENYI_ORDERS, np.sum(curves, axis=0), delta=delta)
    additive_epsilon = float(sum(report.epsilon for report in declared))
    rule = {
        (True, True): RULE_RDP_AND_ADDITIVE,
        (True, False): RULE_RDP,
        (False, True): RULE_ADDITIVE,
        (False, False): RULE_NONE,
    }[(bool(curves), bool(declared))]
    unit = (
        PARTY_LEVEL
        if costs and all(cost.report.unit == PARTY_LEVEL for cost in costs)
        else EXAMPLE_LEVEL
    )
    return Composition(
        epsilon=rdp_epsilon + additive_epsilon,
        delta=float(delta) + float(sum(report.delta for report in declared)),
        rule=rule,
        unit=unit,
        rdp_epsilon=rdp_epsilon,
        additive_epsilon=additive_epsilon,
        order=order,
    )


def rule_description(rule: str) -> str:
    """A sentence saying how a composed ε was obtained."""
    return {
        RULE_RDP: "Rényi curves added order by order and converted once at the budget's δ (Mironov 2017, Prop. 1; "
        "Canonne, Kamath, Steinke 2020, Prop. 12).",
        RULE_ADDITIVE: "Declared (ε, δ) pairs added by basic composition (Dwork and Roth 2014, Thm. 3.16).",
        RULE_RDP_AND_ADDITIVE: "Rényi curves composed and converted at the budget's δ, plus declared (ε, δ) pairs "
        "added by basic composition.",
        RULE_NONE: "Nothing spent.",
    }[rule]


def fits(
    committed: Sequence[PrivacyCost], cost: PrivacyCost, *, epsilon_limit: float, delta: float
) -> bool:
    """Whether ``cost`` on top of the ``committed`` costs stays within ``epsilon_limit`` at δ."""
    return compose_costs([*committed, cost], delta=delta).epsilon <= epsilon_limit


@dataclass(frozen=True)
class BudgetView:
    """What calibration needs to know about one silo's budget: its limit, δ and committed costs, and the votes
    its data moves in the job being calibrated (None: s, one submission)."""

    epsilon_limit: float
    delta: float
    committed: tuple[PrivacyCost, ...] = ()
    vote_shift: int | None = None


def _fits_all(budgets: Sequence[BudgetView], cost_for: Callable[[int | None], PrivacyCost]) -> bool:
    """Whether every budget fits the cost ``cost_for(its vote shift)``."""
    return all(
        fits(
            budget.committed,
            cost_for(budget.vote_shift),
            epsilon_limit=budget.epsilon_limit,
            delta=budget.delta,
        )
        for budget in budgets
    )


#: A job's price for calibration: (its privacy settings, a silo's vote shift) → that silo's cost; a job kind's
#: ``l1_cost`` (:class:`workers.algorithms.registry.ServerNoisePrice`) bound to the job's settings.
Price = Callable[[PrivacySettings, int | None], PrivacyCost]


def fedkt_price(*, partitions: int, teachers: int = 1) -> Price:
    """:func:`fedkt_l1_cost_from_parameters` at FedKT's s and t, as a :data:`Price`."""
    return lambda privacy, vote_shift: fedkt_l1_cost_from_parameters(
        privacy, partitions=partitions, teachers=teachers, vote_shift=vote_shift
    )


def calibrate_noise(
    budgets: Sequence[BudgetView],
    *,
    privacy: PrivacySettings | Mapping,
    price: Price,
    iterations: int = 60,
) -> float | None:
    """The least noise for which a job fits every silo's remaining budget (each at its own vote shift).

    ``privacy``: the job's mechanism, delta and n_queries (its gamma and sigma are ignored); ``price``: what it
    costs a silo at a given noise. Bisection on log γ (Laplace: the largest γ that fits) or log σ (Gaussian and
    Confident-GNMax's answers, its T and σ₁ fixed: the smallest σ that fits) through the accountant; ε grows
    monotonically with γ and falls with σ.

    Returns
    -------
    float or None
        γ or σ, rounded towards more noise; None when not even γ = 1e-6 (σ = 1e6) fits.
    """
    settings = PrivacySettings.of(privacy)
    mechanism = settings.mechanism

    def cost_at(log_value: float) -> Callable[[int | None], PrivacyCost]:
        value = math.exp(log_value)
        at = replace(
            settings,
            gamma=value if mechanism == "laplace" else None,
            sigma=None if mechanism == "laplace" else value,
        )
        return lambda vote_shift: price(at, vote_shift)

    less_noise = 1.0 if mechanism == "laplace" else -1.0  # direction of log value that spends more
    safe, risky = -less_noise * math.log(1e6), less_noise * math.log(1e6)
    if not _fits_all(budgets, cost_at(safe)):
        return None
    if _fits_all(budgets, cost_at(risky)):
        return math.exp(risky)
    for _ in range(iterations):
        middle = (safe + risky) / 2
        safe, risky = (middle, risky) if _fits_all(budgets, cost_at(middle)) else (safe, middle)
    return math.exp(safe)


def calibrate_check_noise(
    budgets: Sequence[BudgetView],
    *,
    privacy: PrivacySettings | Mapping,
    price: Price,
    iterations: int = 60,
) -> float | None:
    """The least check noise σ₁ (``sigma_threshold``) for which a Confident-GNMax job fits every silo's remaining
    budget, its σ₂, T and n_queries held fixed: bisection on log σ₁ from the job's own σ₁ to 1e6 (ε falls with
    σ₁). Rounded towards more noise; None when not even σ₁ = 1e6 fits (its answers alone do not)."""
    settings = PrivacySettings.of(privacy)

    def fits_at(log_value: float) -> bool:
        at = replace(settings, sigma_threshold=math.exp(log_value))
        return _fits_all(budgets, lambda vote_shift: price(at, vote_shift))

    safe, risky = math.log(1e6), math.log(float(settings.sigma_threshold or 1e-6))
    if not fits_at(safe):
        return None
    if fits_at(risky):
        return math.exp(risky)
    for _ in range(iterations):
        middle = (safe + risky) / 2
        safe, risky = (middle, risky) if fits_at(middle) else (safe, middle)
    return math.exp(safe)


def calibrate_queries(
    budgets: Sequence[BudgetView],
    *,
    privacy: PrivacySettings | Mapping,
    price: Price,
    max_queries: int = 10_000_000,
) -> int:
    """The most public rows a job may query and still fit every silo's remaining budget.

    ``privacy``: the job's mechanism, noise and delta (its n_queries is ignored); ``price`` as for
    :func:`calibrate_noise`. Integer bisection through the accountant (ε never decreases with more queries).
    Returns 0 when not even one query fits.
    """

    settings = PrivacySettings.of(privacy, n_queries=0)

    def fits_with(n_queries: int) -> bool:
        at = replace(settings, n_queries=n_queries)
        return _fits_all(budgets, lambda vote_shift: price(at, vote_shift))

    low, high = 0, max_queries  # fits_with(low) is true: zero queries cost nothing
    if fits_with(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits_with(middle) else (low, middle)
    return low


def calibrate_gnmax(
    budgets: Sequence[BudgetView],
    *,
    total_votes: int,
    noise_ratio: float,
    delta: float,
    price: Price,
    min_queries: int,
    max_queries: int,
    confident: Mapping | None = None,
) -> dict | None:
    """GNMax's σ and number of queries for a job that names neither: what every silo's remaining budget allows.

    σ is ``noise_ratio`` × ``total_votes`` (the most votes a query can hold: noise in proportion to the vote
    margins, whatever the federation's size), and the job queries the most rows that fit at that σ
    (:func:`calibrate_queries`). Where fewer than ``min_queries`` fit, it queries ``min_queries`` with the least
    σ that fits (:func:`calibrate_noise`); where all ``max_queries`` fit, it queries them all with the least σ
    that fits. Returns the privacy parameters (mechanism, gamma, sigma, delta, n_queries), or None when not even
    ``min_queries`` fit at σ = 1e6.

    ``confident``: Confident-GNMax's ``threshold`` and ``sigma_threshold`` (votes), held fixed; σ is then its
    answers' σ₂ and every candidate query is priced its check and its answer.
    """
    if total_votes < 1 or not noise_ratio > 0 or min_queries < 1:
        raise ValueError(
            "GNMax calibration needs total_votes ≥ 1, noise_ratio > 0 and min_queries ≥ 1."
        )
    privacy = PrivacySettings(
        mechanism="gaussian" if confident is None else "confident_gnmax",
        sigma=float(noise_ratio * total_votes),
        delta=float(delta),
        n_queries=0,
        threshold=None if confident is None else float(confident["threshold"]),
        sigma_threshold=None if confident is None else float(confident["sigma_threshold"]),
    )
    count = calibrate_queries(budgets, privacy=privacy, price=price, max_queries=max_queries)
    if min(min_queries, max_queries) <= count < max_queries:
        return replace(privacy, n_queries=count).as_dict()
    count = max(count, min(min_queries, max_queries))
    sigma = calibrate_noise(budgets, privacy=replace(privacy, n_queries=count), price=price)
    if sigma is None:
        return None
    return replace(privacy, sigma=float(sigma), n_queries=count).as_dict()
