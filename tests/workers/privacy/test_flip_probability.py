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


# --- the abstention event: a noisy maximum ≤ 0 is answered as "abstain" (and released by the training mask) ---


def test_discrete_laplace_survival_is_r_to_the_n_over_one_plus_r():
    from workers.privacy.flip_probability import discrete_laplace_log_survival

    # γ = ln 2, r = ½: Pr[Z ≥ 4] = (1/16)/(3/2) = 1/24; Pr[Z ≥ 0] = 1 − Pr[Z ≥ 1] = 1 − 1/3 = 2/3; Pr[Z ≥ −1] = 5/6.
    survival = np.exp(discrete_laplace_log_survival(np.array([4, 0, -1]), gamma=np.log(2)))
    np.testing.assert_allclose(survival, [1 / 24, 2 / 3, 5 / 6], rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.7, 3.0])
def test_discrete_gaussian_survival_equals_the_sum_over_its_pmf(sigma):
    from workers.privacy.flip_probability import discrete_gaussian_log_survival

    support = np.arange(-400, 401)
    log_pmf = -(support**2) / (2 * sigma**2)
    log_pmf -= logsumexp(log_pmf)
    for n in (-2, 0, 1, 5):
        expected = logsumexp(log_pmf[support >= n])
        assert discrete_gaussian_log_survival(np.array([n]), sigma=sigma)[0] == pytest.approx(
            expected, rel=1e-9
        )


def test_laplace_flip_probability_adds_the_winner_falling_to_zero():
    from workers.privacy.flip_probability import laplace_noisy_max_log_q

    # γ = ln 2 (r = ½), counts (4, 0): the other class reaches the winner with Pr[Z1 − Z2 ≥ 4]
    # = Σ_{m≥4} (1/9)(½)^m (5/3 + m) = (1/144)(16/3 + 8) = 5/54, and the winner falls to ≤ 0 with
    # Pr[Z ≤ −4] = 1/24: q = 5/54 + 1/24 = 29/216 (it was 5/54 without the abstention event).
    log_q = laplace_noisy_max_log_q(np.array([[4, 0]]), gamma=np.log(2))
    assert np.exp(log_q[0]) == pytest.approx(29 / 216, rel=1e-12)


def test_a_single_class_can_still_abstain():
    from workers.privacy.flip_probability import gaussian_noisy_max_log_q, laplace_noisy_max_log_q

    # One class of 2 votes, γ = ln 2: only abstention changes the answer, Pr[Z ≤ −2] = (1/4)/(3/2) = 1/6.
    assert np.exp(laplace_noisy_max_log_q(np.array([[2]]), gamma=np.log(2))[0]) == pytest.approx(
        1 / 6, rel=1e-12
    )
    assert gaussian_noisy_max_log_q(np.array([[2]]), sigma=1.0)[0] > -np.inf


def test_an_abstention_prone_winner_raises_the_data_dependent_epsilon():
    from workers.privacy.data_dependent import laplace_data_dependent_rdp
    from workers.privacy.rdp import RENYI_ORDERS, discrete_laplace_rdp

    gamma = 0.5
    independent = 2 * discrete_laplace_rdp(RENYI_ORDERS, gamma=gamma, shift=2)
    # Same gap of 8 votes; the first winner sits at 8 votes (noise can push it to ≤ 0), the second at 40.
    low, high = laplace_data_dependent_rdp(
        np.array([[8, 0], [40, 32]]), gamma=gamma, vote_shift=2, independent_rdp=independent
    )
    assert np.all(low >= high) and np.any(low > high)
