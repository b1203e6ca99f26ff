import numpy as np

from workers.privacy.data_dependent import (
    gaussian_data_dependent_rdp,
    laplace_data_dependent_rdp,
    laplace_log_moments,
    pure_dp_log_moments,
)
from workers.privacy.rdp import RENYI_ORDERS, discrete_laplace_rdp

MOMENTS_1_TO_8 = np.arange(1, 9)


# The FedKT paper's own analysis code, per query, continuous Laplace formula.
def test_log_moments_reproduce_the_paper_for_a_unanimous_vote():
    expected = [0.04, 0.12, 0.24, 0.4, 0.6, 0.84, 1.12, 1.351139]
    moments = laplace_log_moments([5, 0], gamma=0.1, pure_epsilon=0.2, moment_orders=MOMENTS_1_TO_8)
    np.testing.assert_allclose(moments, expected, atol=1e-6)


def test_log_moments_reproduce_the_paper_for_a_split_vote():
    expected = [0.647506, 1.337429, 2.076925, 2.868995, 3.711395, 4.597456, 5.518267, 6.464878]
    moments = laplace_log_moments(
        [[4, 1]], gamma=0.5, pure_epsilon=1.0, moment_orders=MOMENTS_1_TO_8
    )
    np.testing.assert_allclose(moments[0], expected, atol=1e-6)


def test_log_moments_fall_back_to_the_pure_dp_terms_when_q_is_too_large():
    # A tie: q ≥ 1/2 > 1/(e^{ε0}+1), so only min(½ε0²λ(λ+1), ε0λ) remains.
    moments = laplace_log_moments([3, 3], gamma=0.5, pure_epsilon=1.0, moment_orders=MOMENTS_1_TO_8)
    lambdas = MOMENTS_1_TO_8
    np.testing.assert_allclose(moments, np.minimum(0.5 * lambdas * (lambdas + 1), lambdas))


def test_pure_dp_log_moments_are_vectorised_over_queries():
    log_q = np.log([0.01, 0.2, 0.9])
    together = pure_dp_log_moments(log_q, pure_epsilon=0.4, moment_orders=MOMENTS_1_TO_8)
    one_by_one = [
        pure_dp_log_moments(log_q[[i]], pure_epsilon=0.4, moment_orders=MOMENTS_1_TO_8)[0]
        for i in range(3)
    ]
    np.testing.assert_allclose(together, one_by_one)


def test_laplace_data_dependent_rdp_is_capped_by_and_below_the_independent_curve():
    independent = 2 * discrete_laplace_rdp(RENYI_ORDERS, gamma=0.2, shift=2)
    counts = np.array([[100, 0], [50, 50], [60, 40]])
    dependent = laplace_data_dependent_rdp(
        counts, gamma=0.2, vote_shift=2, independent_rdp=independent
    )
    assert dependent.shape == (3, len(RENYI_ORDERS))
    assert np.all(dependent <= independent)
    np.testing.assert_allclose(dependent[1], independent)  # a tie gains nothing
    assert dependent[0].min() < 1e-6 * independent.min()  # a landslide costs almost nothing


def test_gaussian_data_dependent_rdp_is_capped_by_and_below_the_independent_curve():
    slope = 1 / 4.0**2
    counts = np.array([[100, 0], [10, 10]])
    dependent = gaussian_data_dependent_rdp(counts, sigma=4.0, rdp_slope=slope)
    independent = slope * RENYI_ORDERS
    assert np.all(dependent <= independent)
    np.testing.assert_allclose(dependent[1], independent)
    assert np.any(dependent[0] < 1e-3 * independent)


def test_a_single_class_answer_costs_only_its_chance_of_abstaining():
    # One class of 7 votes can still fall to ≤ 0 under noise σ = 2 (an abstention, released by the
    # training mask); at 1,000 votes that is beyond the noise's support in double precision: free.
    near = gaussian_data_dependent_rdp(np.array([[7]]), sigma=2.0, rdp_slope=0.25)
    assert np.all(near > 0) and np.all(near <= 0.25 * RENYI_ORDERS)
    assert np.all(gaussian_data_dependent_rdp(np.array([[1000]]), sigma=2.0, rdp_slope=0.25) == 0)
