import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, LaplaceDpEvent, SelfComposedDpEvent
from dp_accounting.dp_event import DiscreteLaplaceDpEvent
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy.special import logsumexp

from workers.privacy.rdp import (
    RENYI_ORDERS,
    continuous_laplace_rdp,
    discrete_laplace_rdp,
    epsilon_from_rdp,
    gaussian_rdp,
)

ORDERS = np.array([1.05, 1.5, 2.0, 7.3, 40.0, 1_000.0])


def brute_force_discrete_laplace_rdp(order, gamma, shift):
    support = np.arange(-4_000, 4_000)
    log_p, log_q = -gamma * np.abs(support), -gamma * np.abs(support - shift)
    log_normaliser = logsumexp(log_p)
    return logsumexp(order * log_p + (1 - order) * log_q - log_normaliser) / (order - 1)


def epsilon_of_accountant(accountant, event, delta=1e-5):
    accountant.compose(event)
    return accountant.get_epsilon(delta)


def test_order_grid_is_wide_and_fine():
    assert RENYI_ORDERS.min() < 1.05 and RENYI_ORDERS.max() >= 10_000
    assert len(RENYI_ORDERS) >= 200
    assert np.all(np.diff(RENYI_ORDERS) > 0)


@pytest.mark.parametrize("gamma, shift", [(0.1, 1), (0.1, 3), (0.04, 2), (0.5, 5)])
def test_discrete_laplace_rdp_equals_the_sum_over_its_pmf(gamma, shift):
    expected = [brute_force_discrete_laplace_rdp(order, gamma, shift) for order in ORDERS[:5]]
    np.testing.assert_allclose(
        discrete_laplace_rdp(ORDERS[:5], gamma=gamma, shift=shift), expected, rtol=1e-9
    )


@pytest.mark.parametrize("gamma, shift", [(0.1, 1), (0.04, 2), (1.0, 3)])
def test_discrete_laplace_rdp_exceeds_the_continuous_formula(gamma, shift):
    discrete = discrete_laplace_rdp(ORDERS, gamma=gamma, shift=shift)
    continuous = continuous_laplace_rdp(ORDERS, gamma=gamma, shift=shift)
    assert np.all(discrete >= continuous)
    assert np.all(discrete <= gamma * shift + 1e-12)  # never above the pure-DP cost


def test_continuous_laplace_rdp_matches_dp_accounting_at_each_order():
    accountant_orders = [1.5, 2.0, 8.0, 64.0]
    accountant = RdpAccountant(orders=accountant_orders)
    accountant.compose(LaplaceDpEvent(noise_multiplier=1 / 0.3))
    np.testing.assert_allclose(
        continuous_laplace_rdp(accountant_orders, gamma=0.3, shift=1), accountant._rdp, rtol=1e-9
    )


def test_gaussian_rdp_matches_dp_accounting_at_each_order():
    accountant_orders = [1.5, 2.0, 8.0, 64.0]
    accountant = RdpAccountant(orders=accountant_orders)
    accountant.compose(GaussianDpEvent(noise_multiplier=5.0 / 2))
    np.testing.assert_allclose(
        gaussian_rdp(accountant_orders, sigma=5.0, shift=2), accountant._rdp, rtol=1e-12
    )


def test_conversion_matches_dp_accounting_on_the_same_curve():
    rdp = 100 * continuous_laplace_rdp(RENYI_ORDERS, gamma=0.04, shift=1)
    expected_epsilon, expected_order = compute_epsilon(list(RENYI_ORDERS), list(rdp), 1e-5)
    assert epsilon_from_rdp(RENYI_ORDERS, rdp, delta=1e-5) == pytest.approx(
        (expected_epsilon, expected_order)
    )


# ENVIRONMENT.md §3: 100 Laplace releases, δ = 1e-5 → RDP 4.5327 / 1.6500 / 0.7788,
# PLD 4.2203 / 1.5226 / 0.7146, discrete-Laplace PLD 1.5323 at scale 25.
@pytest.mark.parametrize(
    "scale, rdp_accountant_epsilon", [(10, 4.5327), (25, 1.6500), (50, 0.7788)]
)
def test_continuous_laplace_bound_is_close_to_dp_accounting_rdp_and_above_pld(
    scale, rdp_accountant_epsilon
):
    event = SelfComposedDpEvent(LaplaceDpEvent(noise_multiplier=scale), 100)
    ours, _ = epsilon_from_rdp(
        RENYI_ORDERS,
        100 * continuous_laplace_rdp(RENYI_ORDERS, gamma=1 / scale, shift=1),
        delta=1e-5,
    )
    assert epsilon_of_accountant(RdpAccountant(), event) == pytest.approx(
        rdp_accountant_epsilon, abs=1e-4
    )
    assert ours == pytest.approx(rdp_accountant_epsilon, rel=2e-3)
    assert ours >= epsilon_of_accountant(PLDAccountant(), event)


@pytest.mark.parametrize("scale", [10, 25, 50])
def test_discrete_laplace_bound_is_above_the_exact_discrete_pld(scale):
    discrete_event = SelfComposedDpEvent(
        DiscreteLaplaceDpEvent(noise_parameter=1 / scale, sensitivity=1), 100
    )
    pld_epsilon = epsilon_of_accountant(PLDAccountant(), discrete_event)
    ours, _ = epsilon_from_rdp(
        RENYI_ORDERS, 100 * discrete_laplace_rdp(RENYI_ORDERS, gamma=1 / scale, shift=1), delta=1e-5
    )
    assert pld_epsilon <= ours <= 1.12 * pld_epsilon
    if scale == 25:
        assert pld_epsilon == pytest.approx(1.5323, abs=1e-4)


def test_conversion_gives_zero_without_any_query():
    assert epsilon_from_rdp(RENYI_ORDERS, np.zeros_like(RENYI_ORDERS), delta=1e-5)[0] == 0.0


@pytest.mark.parametrize("delta", [0, 1, -0.1, 2.0])
def test_conversion_refuses_a_delta_outside_zero_one(delta):
    with pytest.raises(ValueError, match="δ"):
        epsilon_from_rdp(RENYI_ORDERS, np.ones_like(RENYI_ORDERS), delta=delta)


def test_orders_must_exceed_one():
    with pytest.raises(ValueError, match="greater than 1"):
        continuous_laplace_rdp([1.0, 2.0], gamma=0.1, shift=1)
