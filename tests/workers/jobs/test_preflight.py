"""Simulated noise of pre-flight estimates (workers.jobs.preflight): seeded, and distributed as the real mechanisms'
noise, checked against independent computations (scipy's discrete Laplace pmf, OpenDP's discrete Gaussian sampler)."""

import numpy as np
import pytest
from scipy import stats

from workers.algorithms.registry import algorithm_get
from workers.jobs.noise import replayable_noise
from workers.jobs.preflight import (
    SimulatedGaussianNoise,
    SimulatedLaplaceNoise,
    draw_seeds,
    metric_spread,
    simulated_member_predictions,
    simulated_noise,
)
from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise

ZEROS = np.zeros((20_000, 2), dtype=np.int64)


def test_the_same_seed_draws_the_same_noise_and_another_seed_other_noise():
    counts = np.array([[3, 1], [0, 4]])
    for mechanism in (LaplaceNoise(gamma=0.5), GaussianNoise(sigma=3.0)):
        first = simulated_noise(mechanism, seed=11).noisy_counts(counts)
        assert np.array_equal(first, simulated_noise(mechanism, seed=11).noisy_counts(counts))
        assert not np.array_equal(
            simulated_noise(mechanism, seed=11).noisy_counts(ZEROS),
            simulated_noise(mechanism, seed=12).noisy_counts(ZEROS),
        )
        assert first.dtype == np.int64


def test_a_second_draw_of_one_mechanism_is_a_new_draw_and_repeats_from_the_same_seed():
    for make in (
        lambda: simulated_noise(LaplaceNoise(gamma=0.5), seed=4),
        lambda: simulated_noise(GaussianNoise(sigma=3.0), seed=4),
    ):
        first, again = make(), make()
        draws = [first.noisy_counts(ZEROS[:50]), first.noisy_counts(ZEROS[:50])]
        assert not np.array_equal(draws[0], draws[1])
        assert all(np.array_equal(draw, again.noisy_counts(ZEROS[:50])) for draw in draws)


def test_simulated_laplace_noise_follows_scipys_discrete_laplace_pmf():
    gamma = 0.3
    noise = SimulatedLaplaceNoise(gamma=gamma, seed=5).noisy_counts(ZEROS).ravel()
    values = np.arange(-6, 7)
    observed = np.array([(noise == value).mean() for value in values])
    expected = stats.dlaplace(a=gamma).pmf(values)
    # 40,000 draws: each frequency within 4.5 standard errors of the pmf
    assert np.all(
        np.abs(observed - expected) <= 4.5 * np.sqrt(expected * (1 - expected) / noise.size)
    )
    assert noise.var() == pytest.approx(stats.dlaplace(a=gamma).var(), rel=0.05)


def test_simulated_gaussian_noise_has_the_spread_of_opendps_sampler():
    sigma = 4.0
    simulated = SimulatedGaussianNoise(sigma=sigma, seed=5).noisy_counts(ZEROS).ravel()
    real = GaussianNoise(sigma=sigma).noisy_counts(ZEROS).ravel()  # OpenDP, unseeded
    assert simulated.mean() == pytest.approx(0.0, abs=0.1)
    assert simulated.var() == pytest.approx(real.var(), rel=0.05)
    assert stats.ks_2samp(simulated, real).pvalue > 1e-4


def test_a_simulated_mechanism_is_the_real_one_to_the_engine_and_its_accountant():
    simulated = simulated_noise(GaussianNoise(sigma=2.0), seed=1)
    assert isinstance(simulated, GaussianNoise)
    assert np.allclose(
        simulated.query_rdp([2.0, 8.0], vote_shift=2),
        GaussianNoise(sigma=2.0).query_rdp([2.0, 8.0], vote_shift=2),
    )
    # the job runner's fusion child wraps the mechanism it is given; the simulated draw survives the wrapping
    drawn = []
    wrapped = replayable_noise(simulated, stored=None, on_draw=drawn.append)
    counts = np.array([[5, 0], [1, 4]])
    assert np.array_equal(wrapped.noisy_counts(counts), simulated.noisy_counts(counts))
    assert len(drawn) == 1


def test_a_fedkt_fusion_with_simulated_noise_runs_and_reports_its_privacy():
    public = np.random.default_rng(0).normal(size=(40, 3))
    counts = np.zeros((40, 2), dtype=np.int64)
    counts[np.arange(40), (public[:, 0] > 0).astype(int)] = 6
    fusion = algorithm_get("fedkt").fuse(
        counts,
        public,
        members=[],
        n_classes=2,
        params={"partitions": 2, "final_model": {"family": "logistic_regression"}},
        noise=simulated_noise(LaplaceNoise(gamma=2.0), seed=3),
        seed=0,
    )
    assert fusion.privacy is not None
    assert fusion.model is not None


def test_draw_seeds_are_stable_and_a_longer_list_extends_a_shorter_one():
    assert draw_seeds(7, 3)[:2] == draw_seeds(7, 2)
    assert len(set(draw_seeds(7, 5))) == 5


def test_metric_spread_gives_mean_sample_sd_and_range():
    spread = metric_spread(
        [
            {"accuracy": 0.7, "balanced_accuracy": 0.5},
            {"accuracy": 0.8, "balanced_accuracy": 0.6},
            {"accuracy": 0.9, "balanced_accuracy": 0.7},
        ]
    )
    assert spread["accuracy"] == pytest.approx({"mean": 0.8, "sd": 0.1, "min": 0.7, "max": 0.9})
    assert metric_spread([{"accuracy": 0.7, "balanced_accuracy": 0.5}])["accuracy"]["sd"] == 0.0


def test_a_mechanism_without_a_simulation_is_refused():
    with pytest.raises(ValueError, match="No simulation of the object mechanism"):
        simulated_noise(object(), seed=1)


def test_simulated_votes_follow_the_voters_probabilities_and_each_members_models_agree():
    """An L1 estimate's members (issue 38 item 3): one class per member and row drawn from the operator's model,
    given by every model of that member alike, one-hot as a sandbox returns predictions."""
    probabilities = np.tile([[0.7, 0.2, 0.1]], (4000, 1))
    predictions = simulated_member_predictions(probabilities, n_models=[3, 1, 2], seed=5)

    assert [member.shape for member in predictions] == [(3, 4000, 3), (1, 4000, 3), (2, 4000, 3)]
    for member in predictions:
        assert (member == member[0]).all()  # its models agree
        assert set(np.unique(member)) == {0.0, 1.0} and (member.sum(axis=2) == 1).all()
    shares = np.concatenate([member[0] for member in predictions]).mean(axis=0)
    assert shares == pytest.approx([0.7, 0.2, 0.1], abs=0.02)
    assert not (predictions[0][0] == predictions[1][0]).all()  # members draw independently
    again = simulated_member_predictions(probabilities, n_models=[3, 1, 2], seed=5)
    assert all((a == b).all() for a, b in zip(predictions, again, strict=True))
