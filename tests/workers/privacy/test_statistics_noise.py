"""The statistics kind's example-level Gaussian noise: sensitivity, accounting against dp-accounting (issue 40)."""

import math

import numpy as np
import pytest
from dp_accounting import ComposedDpEvent, GaussianDpEvent
from dp_accounting.rdp import RdpAccountant

from workers.algorithms.sufficient_statistics import class_statistics, statistics_noised
from workers.privacy.rdp import RENYI_ORDERS
from workers.privacy.statistics_noise import (
    STATISTICS_BLOCKS,
    StatisticsNoise,
    statistics_noise_calibrated,
)


def dp_accounting_epsilon(noise: StatisticsNoise) -> float:
    # One Gaussian per released block, each of sensitivity 1 (docs/budgets.md), composed by dp-accounting.
    events = [
        GaussianDpEvent(noise_multiplier=noise.sigma_of(block))
        for block in STATISTICS_BLOCKS
        if noise.sigma_of(block) is not None
    ]
    accountant = RdpAccountant(orders=list(RENYI_ORDERS))
    accountant.compose(ComposedDpEvent(events))
    return accountant.get_epsilon(noise.delta)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
@pytest.mark.parametrize(
    "shares",
    [None, {"counts": 1, "sums": 1, "moment": 1}, {"counts": 0.05, "sums": 0.25, "moment": 0.7}],
)
def test_the_calibrated_noise_costs_the_asked_epsilon_as_dp_accounting_counts_it(epsilon, shares):
    noise = statistics_noise_calibrated(epsilon=epsilon, delta=1e-5, shares=shares)
    assert noise.epsilon == pytest.approx(epsilon, abs=1e-9)
    assert dp_accounting_epsilon(noise) == pytest.approx(noise.epsilon, abs=1e-9)


def test_equal_noise_on_counts_sums_and_moment_is_the_gaussian_mechanism_of_sensitivity_root_three():
    noise = StatisticsNoise(counts=6.0, sums=6.0, moment=6.0, squares=None, delta=1e-5)
    assert noise.effective_sigma == pytest.approx(6.0 / math.sqrt(3), rel=1e-12)
    accountant = RdpAccountant(orders=list(RENYI_ORDERS))
    accountant.compose(GaussianDpEvent(noise_multiplier=6.0 / math.sqrt(3)))
    assert noise.epsilon == pytest.approx(accountant.get_epsilon(1e-5), abs=1e-9)


def test_one_record_moves_each_block_by_at_most_one_whatever_its_norm():
    rng = np.random.default_rng(3)
    rows = rng.normal(scale=5.0, size=(50, 7))
    labels = rng.integers(0, 3, 50)
    base = class_statistics(rows, labels, n_classes=3, clip_norm=2.0)
    for record in (rng.normal(scale=100.0, size=7), np.eye(7)[0] * 9.0, np.full(7, 0.01)):
        added = class_statistics(
            np.vstack([rows, record]), np.append(labels, 1), n_classes=3, clip_norm=2.0
        )
        upper = np.triu_indices(7)
        moves = [
            np.linalg.norm(added.counts - base.counts),
            np.linalg.norm(added.sums - base.sums),
            np.linalg.norm((added.moment - base.moment)[upper]),
            np.linalg.norm(added.squares - base.squares),
        ]
        if record[0] == 9.0:
            moves_of_axis_record = moves
        assert max(moves) <= 1 + 1e-12
    # A record along one axis beyond the clip norm moves every block by exactly 1: the bound is tight.
    assert moves_of_axis_record == pytest.approx([1, 1, 1, 1], abs=1e-12)


def test_noised_statistics_keep_their_shapes_a_symmetric_moment_and_roughly_the_declared_spread():
    rng = np.random.default_rng(4)
    statistics = class_statistics(
        rng.normal(size=(40, 30)), rng.integers(0, 2, 40), n_classes=2, clip_norm=1.0
    )
    noise = StatisticsNoise(counts=1.0, sums=2.0, moment=3.0, squares=None, delta=1e-5)
    noised = statistics_noised(statistics, noise=noise)
    assert noised.squares is None
    np.testing.assert_array_equal(noised.moment, noised.moment.T)
    spread = np.std((noised.moment - statistics.moment)[np.triu_indices(30)])
    assert 2.5 < spread < 3.5


def test_a_declaration_reads_back_to_the_same_noise_and_a_bad_one_is_refused_with_a_sentence():
    noise = statistics_noise_calibrated(epsilon=1.0, delta=1e-5)
    assert StatisticsNoise.from_dict(noise.as_dict()) == noise
    with pytest.raises(ValueError, match="'sigmas'"):
        StatisticsNoise.from_dict({"delta": 1e-5})
    with pytest.raises(ValueError, match="positive finite standard deviation"):
        StatisticsNoise(counts=-1.0, sums=1.0, moment=1.0, squares=None, delta=1e-5)
