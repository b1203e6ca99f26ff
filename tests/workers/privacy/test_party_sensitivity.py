"""A silo is charged for the votes its data can move: k submissions of s students move k·s votes per query."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from scipy.special import logsumexp

from workers.privacy.accounting import (
    party_vote_shifts,
    server_noise_privacy,
    server_noise_privacy_bound,
)
from workers.privacy.costs import BudgetView, calibrate_noise, fedkt_l1_cost, fedkt_price
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise
from workers.privacy.rdp import RENYI_ORDERS

DELTA = 1e-5


def test_each_party_moves_s_votes_per_submission_it_has_in_the_job():
    assert party_vote_shifts(["north", "south", "north", "north"], votes_per_submission=2) == {
        "north": 6,
        "south": 2,
    }
    with pytest.raises(ValueError, match="at least 1"):
        party_vote_shifts(["north"], votes_per_submission=0)


@pytest.mark.parametrize("submissions", [1, 2, 3])
def test_gaussian_party_epsilon_with_k_submissions_is_that_of_sensitivity_k_times_s(submissions):
    # GNMax over the vote vector: one party with k submissions of s = 2 students moves 2k votes out of one class
    # and into another, L2 sensitivity √2·2k. Independent accountant: noise multiplier σ / (√2·2k).
    sigma, n_queries, partitions = 40.0, 100, 2
    cost = fedkt_l1_cost(
        mechanism="gaussian",
        gamma=None,
        sigma=sigma,
        delta=DELTA,
        n_queries=n_queries,
        partitions=partitions,
        vote_shift=submissions * partitions,
    )
    accountant = RdpAccountant()
    accountant.compose(
        SelfComposedDpEvent(
            GaussianDpEvent(noise_multiplier=sigma / (np.sqrt(2) * partitions * submissions)),
            n_queries,
        )
    )
    assert cost.report.epsilon == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-3)
    # The curve is exactly α·(2k)²/σ² per query.
    np.testing.assert_allclose(
        cost.rdp, n_queries * RENYI_ORDERS * (2 * submissions) ** 2 / sigma**2, rtol=1e-12
    )
    assert (cost.report.vote_shift, cost.report.partitions) == (2 * submissions, 2)


@pytest.mark.parametrize("submissions", [1, 2, 3])
def test_laplace_party_curve_with_k_submissions_equals_the_discrete_sum_at_shift_k_times_s(
    submissions,
):
    # Two coordinates shift by Δ = k·s; each carries discrete Laplace noise p(z) ∝ e^{−γ|z|}. Summed by hand over
    # z ∈ [−3000, 3000]: D_α = 2/(α−1) · log Σ_z p(z)^α p(z − Δ)^{1−α}.
    gamma, partitions = 0.04, 2
    shift = submissions * partitions
    cost = fedkt_l1_cost(
        mechanism="laplace",
        gamma=gamma,
        sigma=None,
        delta=DELTA,
        n_queries=1,
        partitions=partitions,
        vote_shift=shift,
    )
    support = np.arange(-3000, 3001)
    log_pmf = -gamma * np.abs(support) - logsumexp(-gamma * np.abs(support))
    for order in (2.0, 8.0, 32.0):
        index = int(np.flatnonzero(order == RENYI_ORDERS)[0])
        by_hand = (
            2 / (order - 1) * logsumexp(order * log_pmf[shift:] + (1 - order) * log_pmf[:-shift])
        )
        assert cost.rdp[index] == pytest.approx(by_hand, rel=1e-9)


def test_two_and_three_submissions_cost_far_more_than_one():
    # The acceptance run's finding: a silo with 2 (3) submissions was charged s but spent ≈ 2.2× (3.7×) as much.
    def epsilon(submissions):
        return fedkt_l1_cost(
            mechanism="laplace",
            gamma=0.04,
            sigma=None,
            delta=DELTA,
            n_queries=100,
            partitions=2,
            vote_shift=2 * submissions,
        ).report.epsilon

    one, two, three = epsilon(1), epsilon(2), epsilon(3)
    assert (
        one
        == fedkt_l1_cost(
            mechanism="laplace", gamma=0.04, sigma=None, delta=DELTA, n_queries=100, partitions=2
        ).report.epsilon
    )  # the default is one submission
    assert 2.0 < two / one < 2.4 and 3.4 < three / one < 4.0


def test_the_job_report_is_that_of_the_party_that_moves_the_most_votes():
    counts = np.array([[6, 0], [2, 4]])
    analysis = server_noise_privacy(
        mechanism=LaplaceNoise(gamma=0.1),
        vote_counts=counts,
        partitions=2,
        teachers=5,
        delta=DELTA,
        vote_shift=4,
    )
    bound = server_noise_privacy_bound(
        mechanism=LaplaceNoise(gamma=0.1),
        n_queries=2,
        partitions=2,
        teachers=5,
        delta=DELTA,
        vote_shift=4,
    )
    assert analysis.data_independent == bound
    assert (analysis.data_dependent.vote_shift, analysis.data_independent.vote_shift) == (4, 4)
    assert analysis.data_dependent.epsilon <= analysis.data_independent.epsilon


def test_a_vote_weight_enters_as_a_larger_integer_shift():
    # A weighted vote (weight 3 on s = 2) is charged s × largest weight = 6 votes, the same as three submissions.
    weighted = server_noise_privacy_bound(
        mechanism=GaussianNoise(sigma=30.0),
        n_queries=10,
        partitions=2,
        teachers=1,
        delta=DELTA,
        vote_shift=2 * 3,
    )
    three = fedkt_l1_cost(
        mechanism="gaussian",
        gamma=None,
        sigma=30.0,
        delta=DELTA,
        n_queries=10,
        partitions=2,
        teachers=1,
        vote_shift=6,
    )
    assert weighted == three.report
    with pytest.raises(ValueError, match="vote_shift"):
        server_noise_privacy_bound(
            mechanism=GaussianNoise(sigma=30.0),
            n_queries=10,
            partitions=2,
            teachers=1,
            delta=DELTA,
            vote_shift=1.5,
        )


def test_calibration_gives_a_silo_with_two_submissions_twice_the_gaussian_noise():
    # Gaussian ε depends on Δ/σ only: the least σ that fits a silo moving 2s votes is exactly twice that for s.
    budget = {"epsilon_limit": 3.0, "delta": DELTA}
    one = calibrate_noise(
        [BudgetView(**budget)],
        privacy={"mechanism": "gaussian", "delta": DELTA, "n_queries": 100},
        price=fedkt_price(partitions=2),
    )
    two = calibrate_noise(
        [BudgetView(**budget, vote_shift=4)],
        privacy={"mechanism": "gaussian", "delta": DELTA, "n_queries": 100},
        price=fedkt_price(partitions=2),
    )
    both = calibrate_noise(
        [BudgetView(**budget), BudgetView(**budget, vote_shift=4)],
        privacy={"mechanism": "gaussian", "delta": DELTA, "n_queries": 100},
        price=fedkt_price(partitions=2),
    )
    assert two == pytest.approx(2 * one, rel=1e-9) and both == two


@pytest.mark.parametrize("mechanism", [LaplaceNoise(gamma=0.04), GaussianNoise(sigma=40.0)])
def test_moving_every_submission_between_the_same_two_classes_is_the_worst_neighbour(mechanism):
    # Two submissions of s = 2: whatever each one's votes do, the count vector moves by at most
    # (−4, +4) on two classes; spread moves (−4, +2, +2), (−2, +2, −2, +2) or votes from nothing (+2, +2) cost less.
    from workers.privacy import rdp

    def scalar(shift):
        if isinstance(mechanism, LaplaceNoise):
            return rdp.discrete_laplace_rdp(RENYI_ORDERS, gamma=mechanism.gamma, shift=shift)
        return rdp.gaussian_rdp(RENYI_ORDERS, sigma=mechanism.sigma, shift=shift)

    charged = mechanism.query_rdp(RENYI_ORDERS, vote_shift=4)
    np.testing.assert_allclose(charged, 2 * scalar(4))
    for moves in ([4, 2, 2], [2, 2, 2, 2], [2, 2]):
        assert np.all(sum(scalar(shift) for shift in moves) <= charged * (1 + 1e-12))
