"""Confident-GNMax (PATE 2018, Algorithm 1) in the privacy core: its data-independent bound against dp-accounting,
which queries it answers, that it releases no data-dependent ε, and its seeded simulation for estimates."""

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant

from workers.jobs.preflight import SimulatedConfidentGaussianNoise, simulated_noise
from workers.privacy.accounting import server_noise_privacy, server_noise_privacy_bound
from workers.privacy.costs import (
    BudgetView,
    calibrate_gnmax,
    fedkt_l1_cost,
    fedkt_price,
    mechanism_from_privacy,
    noise_mechanism,
)
from workers.privacy.mechanisms import WITHHELD, ConfidentGaussianNoise, GaussianNoise

DELTA = 1e-5


def independent_epsilon(*, sigma, sigma_threshold, shift, n_queries, answered=None) -> float:
    """dp-accounting's ε: per candidate a Gaussian check (sensitivity Δ, noise multiplier σ₁/Δ) and a GNMax answer
    (two coordinates moved by Δ: L2 sensitivity √2·Δ, noise multiplier σ₂/(√2·Δ)), composed."""
    accountant = RdpAccountant()
    accountant.compose(
        SelfComposedDpEvent(GaussianDpEvent(noise_multiplier=sigma_threshold / shift), n_queries)
    )
    answers = n_queries if answered is None else answered
    if answers:
        accountant.compose(
            SelfComposedDpEvent(
                GaussianDpEvent(noise_multiplier=sigma / (np.sqrt(2) * shift)), answers
            )
        )
    return accountant.get_epsilon(DELTA)


@pytest.mark.parametrize(
    ("sigma", "sigma_threshold", "shift", "n_queries"),
    [(30.0, 30.0, 2, 25), (20.0, 60.0, 2, 40), (12.0, 9.0, 4, 7)],
)
def test_the_bound_charges_every_candidate_its_check_and_its_answer_as_dp_accounting_does(
    sigma, sigma_threshold, shift, n_queries
):
    mechanism = ConfidentGaussianNoise(sigma=sigma, threshold=50.0, sigma_threshold=sigma_threshold)
    report = server_noise_privacy_bound(
        mechanism=mechanism,
        n_queries=n_queries,
        partitions=2,
        teachers=5,
        delta=DELTA,
        vote_shift=shift,
    )
    expected = independent_epsilon(
        sigma=sigma, sigma_threshold=sigma_threshold, shift=shift, n_queries=n_queries
    )
    assert report.epsilon == pytest.approx(expected, rel=2e-3)  # the order grids differ
    # Charging only the answers of the candidates that might pass would be less: the bound does not.
    assert report.epsilon > independent_epsilon(
        sigma=sigma, sigma_threshold=sigma_threshold, shift=shift, n_queries=n_queries, answered=0
    )
    # The check costs something on top of plain GNMax over the same candidates.
    plain = server_noise_privacy_bound(
        mechanism=GaussianNoise(sigma=sigma),
        n_queries=n_queries,
        partitions=2,
        teachers=5,
        delta=DELTA,
        vote_shift=shift,
    )
    assert report.epsilon > plain.epsilon
    as_dict = report.as_dict()
    assert (
        as_dict["mechanism"],
        as_dict["sigma"],
        as_dict["sigma_threshold"],
        as_dict["threshold"],
    ) == (
        "confident_gnmax",
        sigma,
        sigma_threshold,
        50.0,
    )
    assert as_dict["data_dependent"] is False and as_dict["n_queries"] == n_queries


def test_the_ledger_cost_is_the_same_bound_and_its_curve():
    cost = fedkt_l1_cost(
        mechanism="confident_gnmax",
        gamma=None,
        sigma=30.0,
        threshold=60.0,
        sigma_threshold=30.0,
        delta=DELTA,
        n_queries=25,
        partitions=2,
    )
    assert cost.report.epsilon == pytest.approx(
        independent_epsilon(sigma=30.0, sigma_threshold=30.0, shift=2, n_queries=25), rel=2e-3
    )
    assert cost.rdp is not None and len(cost.rdp) > 0


def test_only_queries_whose_noisy_largest_count_reaches_the_threshold_are_answered():
    counts = np.array([[100, 0], [50, 50], [96, 4], [40, 60], [0, 0], [2, 98]] * 20)
    mechanism = ConfidentGaussianNoise(sigma=5.0, threshold=90.0, sigma_threshold=1.0)
    noisy = mechanism.noisy_counts(counts)
    answered = ConfidentGaussianNoise.answered(noisy)
    # At least 6 σ₁ from the threshold either way (96 against 90): agreed rows pass, split or empty rows never do.
    # (With σ₁ = 2, the 40 rows at 96 and 98 were 3 and 4 σ₁ away: about one run in 40 failed.)
    agreed = counts.max(axis=1) >= 96
    assert np.array_equal(answered, agreed)
    assert np.all(noisy[~answered] == WITHHELD)
    assert np.all(np.abs(noisy[answered] - counts[answered]) < 60)  # GNMax's answers, not withheld


def test_no_data_dependent_epsilon_is_released():
    analysis = server_noise_privacy(
        mechanism=ConfidentGaussianNoise(sigma=10.0, threshold=6.0, sigma_threshold=4.0),
        vote_counts=np.array([[10, 0], [4, 6]]),
        partitions=2,
        teachers=5,
        delta=DELTA,
    )
    assert analysis.data_dependent is None
    assert analysis.data_independent.data_dependent is False


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({"mechanism": "confident_gnmax", "sigma": 3.0, "threshold": 5.0}, "sigma_threshold"),
        ({"mechanism": "gaussian", "sigma": 3.0, "threshold": 5.0}, "Only Confident-GNMax"),
        (
            {"mechanism": "confident_gnmax", "sigma": 3.0, "threshold": -1, "sigma_threshold": 2},
            "threshold must be positive",
        ),
        ({"mechanism": "pate", "sigma": 3.0}, "must be one of"),
    ],
)
def test_bad_parameters_are_refused_with_a_sentence(privacy, message):
    with pytest.raises(ValueError, match=message):
        mechanism_from_privacy(privacy)


def test_noise_mechanism_builds_confident_gnmax():
    mechanism = noise_mechanism(
        mechanism="confident_gnmax", gamma=None, sigma=3.0, threshold=5.0, sigma_threshold=2.0
    )
    assert mechanism == ConfidentGaussianNoise(sigma=3.0, threshold=5.0, sigma_threshold=2.0)


def test_calibration_fits_the_budget_with_the_check_charged():
    privacy = calibrate_gnmax(
        [BudgetView(epsilon_limit=2.56, delta=DELTA, vote_shift=2)],
        total_votes=100,
        noise_ratio=0.3,
        delta=DELTA,
        price=fedkt_price(partitions=2, teachers=5),
        min_queries=10,
        max_queries=5000,
        confident={"threshold": 60.0, "sigma_threshold": 30.0},
    )
    assert privacy["mechanism"] == "confident_gnmax" and privacy["sigma"] == 30.0
    spent = independent_epsilon(
        sigma=30.0, sigma_threshold=30.0, shift=2, n_queries=privacy["n_queries"]
    )
    one_more = independent_epsilon(
        sigma=30.0, sigma_threshold=30.0, shift=2, n_queries=privacy["n_queries"] + 1
    )
    assert spent <= 2.56 * (1 + 2e-3) and one_more > 2.56 * (1 - 2e-3)
    plain = calibrate_gnmax(
        [BudgetView(epsilon_limit=2.56, delta=DELTA, vote_shift=2)],
        total_votes=100,
        noise_ratio=0.3,
        delta=DELTA,
        price=fedkt_price(partitions=2, teachers=5),
        min_queries=10,
        max_queries=5000,
    )
    assert (
        privacy["n_queries"] < plain["n_queries"]
    )  # the checks are paid for with fewer candidates


def test_the_estimate_simulates_both_draws_from_its_seed():
    mechanism = ConfidentGaussianNoise(sigma=8.0, threshold=60.0, sigma_threshold=10.0)
    counts = np.array([[70, 30], [55, 45], [90, 10]] * 30)
    first, again = simulated_noise(mechanism, seed=3), simulated_noise(mechanism, seed=3)
    assert isinstance(first, SimulatedConfidentGaussianNoise)
    assert np.array_equal(first.noisy_counts(counts), again.noisy_counts(counts))
    other = simulated_noise(mechanism, seed=4).noisy_counts(counts)
    assert not np.array_equal(first.noisy_counts(counts), other)  # the generator moves on
