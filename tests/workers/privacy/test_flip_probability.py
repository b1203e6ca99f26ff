import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from workers.privacy.flip_probability import (
    continuous_laplace_log_tail,
    discrete_gaussian_log_tail,
    discrete_laplace_log_tail,
    union_bound_log_q,
    vote_gaps,
)


def brute_force_log_tail(log_pmf, support, gap):
    """log Pr[Z1 − Z2 ≥ gap] by summing the joint pmf over a grid."""
    difference = support[:, None] - support[None, :]
    joint = log_pmf[:, None] + log_pmf[None, :]
    return logsumexp(np.where(difference >= gap, joint, -np.inf))


def test_vote_gaps_are_measured_from_the_winner():
    gaps, winners = vote_gaps(np.array([[1, 4, 2], [6, 0, 6]]))
    np.testing.assert_array_equal(gaps, [[3, 0, 2], [0, 6, 0]])
    np.testing.assert_array_equal(winners, [1, 0])


def test_union_bound_sums_every_other_class_and_skips_the_winner():
    counts = np.array([[5, 0, 3]])
    gaps, winners = vote_gaps(counts)
    log_q = union_bound_log_q(continuous_laplace_log_tail(gaps, gamma=0.1), winners)
    expected = 2.5 / (4 * np.exp(0.5)) + 2.2 / (4 * np.exp(0.2))
    assert np.exp(log_q[0]) == pytest.approx(expected)


def test_union_bound_never_exceeds_one():
    counts = np.zeros((1, 10), dtype=np.int64)
    gaps, winners = vote_gaps(counts)
    assert union_bound_log_q(discrete_laplace_log_tail(gaps, gamma=1.0), winners)[0] == 0.0


@pytest.mark.parametrize("gamma", [0.1, 0.5, 1.5])
def test_discrete_laplace_tail_equals_the_sum_over_the_joint_pmf(gamma):
    support = np.arange(-600, 601)
    log_pmf = -gamma * np.abs(support)
    log_pmf -= logsumexp(log_pmf)
    gaps = np.array([0, 1, 2, 7, 20])
    expected = [brute_force_log_tail(log_pmf, support, gap) for gap in gaps]
    np.testing.assert_allclose(discrete_laplace_log_tail(gaps, gamma=gamma), expected, rtol=1e-9)


def test_discrete_laplace_tail_is_within_a_few_percent_of_the_continuous_one_for_small_gamma():
    gaps = np.array([10, 50, 100])
    ratio = np.exp(
        discrete_laplace_log_tail(gaps, gamma=0.04) - continuous_laplace_log_tail(gaps, gamma=0.04)
    )
    assert np.all(ratio >= 1) and np.all(ratio < 1.05)


@pytest.mark.parametrize("sigma", [0.7, 3.0])
def test_discrete_gaussian_tail_equals_the_sum_over_the_joint_pmf(sigma):
    support = np.arange(-200, 201)
    log_pmf = -(support**2) / (2 * sigma**2)
    log_pmf -= logsumexp(log_pmf)
    gaps = np.array([[0, 1], [4, 12]])
    expected = [[brute_force_log_tail(log_pmf, support, gap) for gap in row] for row in gaps]
    np.testing.assert_allclose(discrete_gaussian_log_tail(gaps, sigma=sigma), expected, rtol=1e-9)


def test_discrete_gaussian_tail_approaches_the_continuous_one_for_wide_noise():
    gaps = np.array([20, 60])
    continuous = norm.logsf(gaps - 0.5, scale=np.sqrt(2) * 40.0)  # continuity correction for ties
    np.testing.assert_allclose(discrete_gaussian_log_tail(gaps, sigma=40.0), continuous, rtol=1e-3)
