import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.privacy import LaplaceNoise, party_noise_privacy_bound, server_noise_privacy_bound
from workers.privacy.costs import (
    RULE_ADDITIVE,
    RULE_NONE,
    RULE_RDP,
    RULE_RDP_AND_ADDITIVE,
    BudgetView,
    PrivacyCost,
    calibrate_noise,
    calibrate_queries,
    compose_costs,
    declared_cost,
    fedkt_l1_cost,
    fedkt_l1_cost_from_parameters,
    fedkt_price,
    fits,
)
from workers.privacy.rdp import RENYI_ORDERS, epsilon_from_rdp

DELTA = 1e-5
PROPERTY = settings(max_examples=30, deadline=None)


def laplace_job(n_queries=100, gamma=0.04, partitions=2):
    return fedkt_l1_cost(
        mechanism="laplace",
        gamma=gamma,
        sigma=None,
        delta=DELTA,
        n_queries=n_queries,
        partitions=partitions,
    )


def test_fedkt_l1_cost_report_is_the_accountants_data_independent_bound():
    cost = laplace_job()
    expected = server_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.04), n_queries=100, partitions=2, teachers=1, delta=DELTA
    )
    assert cost.report == expected
    assert cost.report.unit == "party-level" and cost.report.data_dependent is False
    assert epsilon_from_rdp(RENYI_ORDERS, cost.rdp, delta=DELTA)[0] == pytest.approx(
        expected.epsilon, rel=1e-12
    )


def test_fedkt_l1_cost_from_job_parameters_reads_the_privacy_dict():
    privacy = {
        "mechanism": "gaussian",
        "gamma": None,
        "sigma": 40.0,
        "delta": 1e-6,
        "n_queries": 50,
    }
    cost = fedkt_l1_cost_from_parameters(privacy, partitions=3)
    assert (
        cost.report.mechanism,
        cost.report.sigma,
        cost.report.n_queries,
        cost.report.partitions,
    ) == ("gaussian", 40.0, 50, 3)
    # Gaussian: the curve is n·α·s²/σ² exactly.
    assert np.allclose(cost.rdp, 50 * RENYI_ORDERS * 9 / 1600)


@pytest.mark.parametrize(
    "privacy, message",
    [
        (
            {"mechanism": "laplace", "sigma": 3.0, "delta": 1e-5, "n_queries": 5},
            "Laplace noise takes 'gamma'",
        ),
        (
            {"mechanism": "uniform", "gamma": 1.0, "delta": 1e-5, "n_queries": 5},
            "must be one of laplace, gaussian, confident_gnmax",
        ),
        ({"mechanism": "laplace", "gamma": 1.0, "n_queries": 5}, "lack delta"),
    ],
)
def test_fedkt_l1_cost_refuses_malformed_parameters(privacy, message):
    with pytest.raises(ValueError, match=message):
        fedkt_l1_cost_from_parameters(privacy, partitions=2)


def test_three_jobs_compose_through_rdp_to_less_than_three_times_one():
    one = laplace_job()
    composed = compose_costs([one, one, one], delta=DELTA)
    assert composed.rule == RULE_RDP and composed.unit == "party-level"
    expected, order = epsilon_from_rdp(RENYI_ORDERS, 3 * np.asarray(one.rdp), delta=DELTA)
    assert composed.epsilon == pytest.approx(expected, rel=1e-12) and composed.order == order
    assert composed.epsilon < 3 * one.report.epsilon
    # Three jobs of 100 queries are one job of 300 queries.
    assert composed.epsilon == pytest.approx(laplace_job(n_queries=300).report.epsilon, rel=1e-9)


def test_nothing_composes_to_zero():
    composed = compose_costs([], delta=DELTA)
    assert (composed.epsilon, composed.rule, composed.order) == (0.0, RULE_NONE, None)


def test_declared_epsilon_above_the_parameters_bound_is_charged_as_declared_and_adds_up():
    bound = party_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.5), n_queries=10, partitions=2, teachers=5, delta=DELTA
    )
    cost = declared_cost(
        epsilon=bound.epsilon + 1.0, delta=DELTA, bound=bound, bound_rdp=[0.0] * len(RENYI_ORDERS)
    )
    assert (
        cost.rdp is None
        and cost.report.epsilon == bound.epsilon + 1.0
        and cost.report.unit == "example-level"
    )
    composed = compose_costs([cost, cost], delta=DELTA)
    assert composed.rule == RULE_ADDITIVE
    assert composed.epsilon == pytest.approx(2 * (bound.epsilon + 1.0))
    assert composed.delta == pytest.approx(3 * DELTA)  # the budget's δ plus each declared δ


def test_declared_epsilon_equal_to_its_bound_composes_through_its_curve():
    noise = LaplaceNoise(gamma=0.5)
    bound = party_noise_privacy_bound(
        mechanism=noise, n_queries=10, partitions=2, teachers=5, delta=DELTA
    )
    curve = 20 * noise.query_rdp(RENYI_ORDERS, vote_shift=1)
    cost = declared_cost(epsilon=bound.epsilon, delta=DELTA, bound=bound, bound_rdp=curve)
    assert cost.rdp is not None
    mixed = compose_costs(
        [cost, laplace_job(), declared_cost(epsilon=0.5, delta=1e-6)], delta=DELTA
    )
    assert mixed.rule == RULE_RDP_AND_ADDITIVE and mixed.unit == "example-level"
    assert mixed.additive_epsilon == 0.5 and mixed.epsilon == pytest.approx(mixed.rdp_epsilon + 0.5)


def test_a_cost_survives_its_json_form():
    cost = laplace_job()
    assert PrivacyCost.from_dict(cost.as_dict()) == cost
    declared = declared_cost(epsilon=1.5, delta=DELTA)
    assert PrivacyCost.from_dict(declared.as_dict()) == declared


def test_a_cost_stored_on_an_old_order_grid_falls_back_to_additive_composition():
    stored = laplace_job().as_dict()
    stored["rdp"]["orders"] = stored["rdp"]["orders"][:-1]
    cost = PrivacyCost.from_dict(stored)
    assert cost.rdp is None and cost.report == laplace_job().report
    assert compose_costs([cost, cost], delta=DELTA).rule == RULE_ADDITIVE


def test_calibrated_gamma_is_the_largest_that_fits():
    budget = BudgetView(epsilon_limit=10.0, delta=DELTA, committed=(laplace_job(),))
    gamma = calibrate_noise(
        [budget],
        privacy={"mechanism": "laplace", "delta": DELTA, "n_queries": 100},
        price=fedkt_price(partitions=2),
    )
    job = lambda value: laplace_job(gamma=value)  # noqa: E731
    assert fits(budget.committed, job(gamma), epsilon_limit=10.0, delta=DELTA)
    assert not fits(budget.committed, job(gamma * 1.001), epsilon_limit=10.0, delta=DELTA)


def test_calibration_takes_the_tightest_silo_and_gaussian_sigma_is_the_smallest_that_fits():
    roomy, tight = (
        BudgetView(epsilon_limit=20.0, delta=DELTA),
        BudgetView(epsilon_limit=2.0, delta=DELTA),
    )
    sigma = calibrate_noise(
        [roomy, tight],
        privacy={"mechanism": "gaussian", "delta": DELTA, "n_queries": 100},
        price=fedkt_price(partitions=2),
    )

    def job(value):
        return fedkt_l1_cost(
            mechanism="gaussian", gamma=None, sigma=value, delta=DELTA, n_queries=100, partitions=2
        )

    assert fits((), job(sigma), epsilon_limit=2.0, delta=DELTA)
    assert not fits((), job(sigma * 0.999), epsilon_limit=2.0, delta=DELTA)


def test_calibrated_queries_are_the_most_that_fit_and_zero_when_nothing_does():
    budget = BudgetView(epsilon_limit=5.0, delta=DELTA)
    n_queries = calibrate_queries(
        [budget],
        privacy={"mechanism": "laplace", "gamma": 0.04, "sigma": None, "delta": DELTA},
        price=fedkt_price(partitions=2),
    )
    assert (
        laplace_job(n_queries=n_queries).report.epsilon
        <= 5.0
        < laplace_job(n_queries=n_queries + 1).report.epsilon
    )
    full = BudgetView(
        epsilon_limit=1.0, delta=DELTA, committed=(declared_cost(epsilon=1.0, delta=DELTA),)
    )
    assert (
        calibrate_queries(
            [full],
            privacy={"mechanism": "laplace", "gamma": 0.04, "sigma": None, "delta": DELTA},
            price=fedkt_price(partitions=2),
        )
        == 0
    )
    # Only noise so large that the answers are nearly independent of the votes (ε rounds to 0 at δ) still fits.
    assert (
        calibrate_noise(
            [full],
            privacy={"mechanism": "laplace", "delta": DELTA, "n_queries": 10},
            price=fedkt_price(partitions=2),
        )
        < 1e-5
    )


job_parameters = st.fixed_dictionaries(
    {
        "mechanism": st.just("laplace"),
        "gamma": st.floats(0.005, 2.0),
        "sigma": st.none(),
        "delta": st.sampled_from([1e-5, 1e-6]),
        "n_queries": st.integers(1, 2000),
    }
) | st.fixed_dictionaries(
    {
        "mechanism": st.just("gaussian"),
        "gamma": st.none(),
        "sigma": st.floats(1.0, 200.0),
        "delta": st.sampled_from([1e-5, 1e-6]),
        "n_queries": st.integers(1, 2000),
    }
)


@PROPERTY
@given(privacy=job_parameters, partitions=st.integers(1, 4), extra=st.integers(1, 500))
def test_epsilon_never_decreases_with_more_queries(privacy, partitions, extra):
    fewer = fedkt_l1_cost_from_parameters(privacy, partitions=partitions)
    more = fedkt_l1_cost_from_parameters(
        {**privacy, "n_queries": privacy["n_queries"] + extra}, partitions=partitions
    )
    assert more.report.epsilon >= fewer.report.epsilon
    assert compose_costs([more], delta=DELTA).epsilon >= compose_costs([fewer], delta=DELTA).epsilon


@PROPERTY
@given(
    jobs=st.lists(st.tuples(job_parameters, st.integers(1, 4)), min_size=1, max_size=6),
    declared=st.lists(st.floats(0.01, 5.0), max_size=3),
)
def test_composed_epsilon_is_at_most_the_sum_of_the_epsilons(jobs, declared):
    costs = [
        fedkt_l1_cost_from_parameters({**privacy, "delta": DELTA}, partitions=partitions)
        for privacy, partitions in jobs
    ]
    costs += [declared_cost(epsilon=epsilon, delta=DELTA) for epsilon in declared]
    composed = compose_costs(costs, delta=DELTA)
    total = math.fsum(cost.report.epsilon for cost in costs)
    assert composed.epsilon <= total * (1 + 1e-12)
    assert composed.epsilon >= max(cost.report.epsilon for cost in costs) * (1 - 1e-12)


@pytest.mark.parametrize("declared", [1e-300, 1e-9, 0.05, 3.0, 500.0])
@pytest.mark.parametrize("delta", [1e-5, 0.3])
def test_a_declaration_charged_at_the_budgets_delta_spends_at_least_its_epsilon_there(
    declared, delta
):
    """declared_cost_at: the recomputed DP-SGD curve raised so that, converted at the budget's δ, it spends the
    larger of the declared ε and its own; it composes through RDP and adds no δ (issue 32, item 2)."""
    from workers.privacy.costs import declared_cost_at
    from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound

    bound, curve = dp_sgd_privacy_bound(
        DpSgdParameters(
            noise_multiplier=1000.0,
            max_grad_norm=1.0,
            batch_size=100,
            epochs=4,
            n_examples=2000,
            delta=1e-6,
        )
    )
    own = epsilon_from_rdp(RENYI_ORDERS, curve, delta=delta)[0]
    cost = declared_cost_at(epsilon=declared, delta=delta, bound=bound, bound_rdp=curve)
    spent = epsilon_from_rdp(RENYI_ORDERS, np.asarray(cost.rdp), delta=delta)[0]
    assert spent >= max(declared, own)
    assert cost.report.epsilon == max(spent, declared)
    assert np.all(np.asarray(cost.rdp) >= curve)  # never below the mechanism's curve
    composition = compose_costs([cost], delta=delta)
    assert (composition.rule, composition.delta, composition.epsilon) == ("rdp", delta, spent)
