"""The engine's L1 plans (issue 41 item 2) and the budget advisor's candidates (issue 40 item 4), on FedKT's price
with tiny budgets: every candidate fits every budget, none is offered where nothing fits, and the plan a market asks
for is the calibration the market used to compute itself."""

import math

import pytest

import workers.algorithms  # noqa: F401  (registers every job kind)
from workers.algorithms.registry import ALGORITHMS
from workers.privacy.costs import BudgetView, compose_costs
from workers.privacy.plans import (
    ADVISED_MECHANISMS,
    MAX_GNMAX_NOISE_RATIO,
    PlanRequest,
    advised_candidates,
    advised_query_counts,
    budgets_within_share,
    l1_plan,
)

FEDKT = ALGORITHMS["fedkt"]
SETTINGS = FEDKT.validate({"partitions": 1, "teachers": 2, "query_count": 90})


def _epsilon(candidate, view):
    cost = FEDKT.l1_cost(SETTINGS, privacy=candidate.privacy, vote_shift=view.vote_shift)
    return compose_costs([*view.committed, cost], delta=view.delta).epsilon


def test_the_advisor_tries_a_tenth_a_third_and_all_of_the_query_at_least_the_fewest_rows_a_model_learns_from():
    assert advised_query_counts(n_queries=500, n_public=2000, min_queries=10) == [50, 167, 500]
    assert advised_query_counts(n_queries=12, n_public=3000, min_queries=10) == [10, 12]


def test_every_advised_candidate_fits_every_members_remaining_budget_at_the_least_noise():
    budgets = [
        BudgetView(epsilon_limit=4.0, delta=1e-5, vote_shift=1),
        BudgetView(epsilon_limit=2.0, delta=1e-5, vote_shift=2),
    ]
    candidates = advised_candidates(
        kind=FEDKT,
        settings=SETTINGS,
        budgets=budgets,
        delta=1e-5,
        query_counts=[30, 90],
        most_votes=20,
    )
    assert {(c.privacy.mechanism, c.privacy.n_queries) for c in candidates} == {
        (mechanism, count) for mechanism in ADVISED_MECHANISMS for count in (30, 90)
    }
    for candidate in candidates:
        assert candidate.unit == "party-level"
        # the tightest silo (ε 2 at two votes a query) is what the noise is calibrated to, and it fits
        assert max(_epsilon(candidate, view) for view in budgets) <= 2.0 + 1e-9
        assert _epsilon(candidate, budgets[1]) > 1.9
        assert candidate.cost.report.delta == 1e-5
        assert candidate.as_dict()["epsilon"] == candidate.cost.report.epsilon


def test_no_candidate_is_advised_where_only_a_model_of_pure_noise_would_fit():
    tiny = [BudgetView(epsilon_limit=0.01, delta=1e-5, vote_shift=1)]
    candidates = advised_candidates(
        kind=FEDKT, settings=SETTINGS, budgets=tiny, delta=1e-5, query_counts=[90], most_votes=2
    )
    assert candidates == []
    assert MAX_GNMAX_NOISE_RATIO == 5.0


def _request(**changes):
    fields = dict(
        settings=SETTINGS,
        given_privacy={},
        defaults={},
        delta=1e-5,
        n_queries=90,
        query_named=False,
        takes_query=True,
        most_votes=20,
        min_queries=10,
    )
    return PlanRequest(**{**fields, **changes})


def test_a_default_plan_is_gnmax_whose_priced_cost_fits_the_budget_it_was_calibrated_to():
    share = [BudgetView(epsilon_limit=5.0, delta=1e-5)]
    plan = l1_plan(kind=FEDKT, request=_request(), budgets=share, budgets_named="the share")
    assert plan.privacy.mechanism == "gaussian"
    assert math.isclose(plan.privacy.sigma, 0.35 * 20) or plan.n_queries == 10
    assert 10 <= plan.n_queries <= 90
    assert plan.cost.report.epsilon <= 5.0 + 1e-9
    assert plan.cost == FEDKT.l1_cost(SETTINGS, privacy=plan.privacy, vote_shift=1)


def test_a_plan_that_nothing_fits_is_a_sentence_naming_the_budget():
    share = [BudgetView(epsilon_limit=0.001, delta=1e-5)]
    with pytest.raises(
        ValueError, match=r"the share \(ε 0.001, party-level, δ = 1e-05\) does not cover 10"
    ):
        l1_plan(kind=FEDKT, request=_request(), budgets=share, budgets_named="the share")


def test_a_laplace_plan_keeps_its_gamma_and_queries_at_most_what_fits():
    share = [BudgetView(epsilon_limit=1.0, delta=1e-5)]
    plan = l1_plan(
        kind=FEDKT,
        request=_request(given_privacy={"mechanism": "laplace", "gamma": 0.05}),
        budgets=share,
        budgets_named="the share",
    )
    assert (plan.privacy.mechanism, plan.privacy.gamma) == ("laplace", 0.05)
    assert 1 <= plan.n_queries < 90 and plan.cost.report.epsilon <= 1.0 + 1e-9
    more = FEDKT.l1_cost(
        SETTINGS, privacy={**plan.privacy.as_dict(), "n_queries": plan.n_queries + 1}, vote_shift=1
    )
    assert more.report.epsilon > 1.0


def test_an_advised_share_leaves_each_member_the_rest_of_what_it_has_left():
    spent = FEDKT.l1_cost(
        SETTINGS,
        privacy={"mechanism": "gaussian", "sigma": 10.0, "delta": 1e-5, "n_queries": 30},
        vote_shift=1,
    )
    fresh = BudgetView(epsilon_limit=10.0, delta=1e-5, vote_shift=1)
    used = BudgetView(epsilon_limit=10.0, delta=1e-5, committed=(spent,), vote_shift=1)
    halves = budgets_within_share([fresh, used], share=0.5)
    assert halves[0].epsilon_limit == 5.0
    already = spent.report.epsilon
    assert 0 < already < 10 and math.isclose(
        halves[1].epsilon_limit, already + 0.5 * (10 - already)
    )
    assert halves[1].committed == (spent,) and halves[1].vote_shift == 1
